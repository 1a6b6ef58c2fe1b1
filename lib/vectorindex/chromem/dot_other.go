//go:build !amd64

package chromem

func dotRowsPrefix(q, rows []float32, d32, dim, n int, out []float32) {
	dotRowsGo(q, rows, d32, dim, n, out)
}
