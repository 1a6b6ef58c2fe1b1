//go:build !amd64

package evaluator

// useAVX2 is false off amd64; the tests read it on every architecture.
var useAVX2 = false

func dot64Prefix(a, b []float64, n16 int) float64 { return dot64Head(a[:n16], b[:n16]) }
