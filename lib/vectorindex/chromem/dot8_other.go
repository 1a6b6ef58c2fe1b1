//go:build !amd64

package chromem

func dot8RowsPrefix(q []int16, rows []int8, d16, dim, n int, out []int32) {
	dot8RowsGo(q, rows, d16, dim, n, out)
}
