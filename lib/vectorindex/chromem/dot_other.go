//go:build !amd64

package chromem

// useAVX2 is false off amd64; the tests read it on every architecture.
var useAVX2 = false

func dotRowsPrefix(q, rows []float32, d32, dim, n int, out []float32) {
	dotRowsGo(q, rows, d32, dim, n, out)
}
