package chromem

// dot8RowsAVX2 is dot8RowsGo in AVX2. d16 is a positive multiple of 16
// (VPMOVSXBW widens 16 codes into one 256-bit register); stride is the
// row length in bytes, which is dim for int8 codes.
//
//go:noescape
func dot8RowsAVX2(q *int16, rows *int8, d16, stride, n int, out *int32)

func dot8RowsPrefix(q []int16, rows []int8, d16, dim, n int, out []int32) {
	if useAVX2 {
		_ = q[d16-1]
		_ = rows[(n-1)*dim+d16-1]
		_ = out[n-1]
		dot8RowsAVX2(&q[0], &rows[0], d16, dim, n, &out[0])
		return
	}
	dot8RowsGo(q, rows, d16, dim, n, out)
}
