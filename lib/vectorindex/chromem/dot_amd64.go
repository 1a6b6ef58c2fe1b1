package chromem

import "golang.org/x/sys/cpu"

var useAVX2 = cpu.X86.HasAVX2

// dotRowsAVX2 is dotRowsGo in AVX2. d32 is a positive multiple of 32;
// stride is the row length in bytes.
//
//go:noescape
func dotRowsAVX2(q, rows *float32, d32, stride, n int, out *float32)

func dotRowsPrefix(q, rows []float32, d32, dim, n int, out []float32) {
	if useAVX2 {
		_ = rows[(n-1)*dim+d32-1]
		_ = out[n-1]
		dotRowsAVX2(&q[0], &rows[0], d32, dim*4, n, &out[0])
		return
	}
	dotRowsGo(q, rows, d32, dim, n, out)
}
