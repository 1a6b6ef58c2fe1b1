package evaluator

import "golang.org/x/sys/cpu"

var useAVX2 = cpu.X86.HasAVX2

// dot64AVX2 is dot64Head in AVX2 over a positive multiple of 16 values.
//
//go:noescape
func dot64AVX2(a, b *float64, n16 int) float64

func dot64Prefix(a, b []float64, n16 int) float64 {
	if useAVX2 && n16 > 0 {
		_, _ = a[n16-1], b[n16-1]
		return dot64AVX2(&a[0], &b[0], n16)
	}
	return dot64Head(a[:n16], b[:n16])
}
