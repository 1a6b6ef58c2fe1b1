package chromem

import (
	"math"
	"math/rand"
	"testing"
)

func TestTheVectorAndPortableDotProductsAgreeBitForBit(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for _, dim := range []int{1, 7, 31, 32, 33, 64, 255, 256, 257, 384, 1000} {
		const n = 9
		q, rows := make([]float32, dim), make([]float32, n*dim)
		for i := range q {
			q[i] = float32(rng.NormFloat64())
		}
		for i := range rows {
			rows[i] = float32(rng.NormFloat64())
		}
		got := make([]float32, n)
		dotRows(q, rows, n, got)
		d32 := dim &^ 31
		want := make([]float32, n)
		if d32 > 0 {
			dotRowsGo(q, rows, d32, dim, n, want)
		}
		for r := range n {
			for i := d32; i < dim; i++ {
				want[r] = float32(want[r] + float32(q[i]*rows[r*dim+i]))
			}
			if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
				t.Fatalf("dim %d row %d: vector %v, portable %v", dim, r, got[r], want[r])
			}
			var exact float64
			for i := range q {
				exact += float64(q[i]) * float64(rows[r*dim+i])
			}
			if math.Abs(float64(got[r])-exact) > 1e-3*math.Max(1, math.Abs(exact)) {
				t.Fatalf("dim %d row %d: %v, exact %v", dim, r, got[r], exact)
			}
		}
		if d := dot(q, rows[:dim]); math.Float32bits(d) != math.Float32bits(got[0]) {
			t.Fatalf("dim %d: dot %v, dotRows %v", dim, d, got[0])
		}
	}
	t.Logf("AVX2 in use: %v", useAVX2)
}

func BenchmarkDotRows256(b *testing.B) {
	const dim, n = 256, 10000
	q, rows, out := make([]float32, dim), make([]float32, dim*n), make([]float32, n)
	for i := range rows {
		rows[i] = float32(i%7) * 0.1
	}
	for i := range q {
		q[i] = float32(i%5) * 0.1
	}
	for b.Loop() {
		dotRows(q, rows, n, out)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}

// dot is the dot product of two vectors of equal length.
func dot(a, b []float32) float32 {
	var out [1]float32
	dotRows(a, b[:len(a)], 1, out[:])
	return out[0]
}
