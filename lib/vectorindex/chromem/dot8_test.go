package chromem

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/precept-dev/precept/lib/vectorindex"
)

// dot8Fills are the code patterns of the int8 tests: random codes, and the
// extremes, where a sum comes nearest to overflowing int32.
var dot8Fills = []struct {
	name string
	q, r func(rng *rand.Rand, i int) int8
}{
	{"random", randomCode, randomCode},
	{"max", func(*rand.Rand, int) int8 { return 127 }, func(*rand.Rand, int) int8 { return 127 }},
	{"min", func(*rand.Rand, int) int8 { return 127 }, func(*rand.Rand, int) int8 { return -127 }},
	{"min-min", func(*rand.Rand, int) int8 { return -127 }, func(*rand.Rand, int) int8 { return -127 }},
	{"min-max", func(*rand.Rand, int) int8 { return -127 }, func(*rand.Rand, int) int8 { return 127 }},
	{"random-extremes", extremeCode, extremeCode},
	{"alternating", func(_ *rand.Rand, i int) int8 { return int8(127 - 254*(i%2)) }, func(_ *rand.Rand, i int) int8 { return int8(127 - 254*(i/3%2)) }},
}

func randomCode(rng *rand.Rand, _ int) int8  { return int8(rng.Intn(255) - 127) }
func extremeCode(rng *rand.Rand, _ int) int8 { return int8(127 - 254*rng.Intn(2)) }

// dot8Dims are every dim up to 80 (each remainder after 16 and 64 codes,
// several times over), the embedders' sizes and the largest allowed.
func dot8Dims() []int {
	var dims []int
	for d := 1; d <= 80; d++ {
		dims = append(dims, d)
	}
	return append(dims, 384, 1024, vectorindex.MaxDimension)
}

func dot8Codes(rng *rand.Rand, dim, n int, fq, fr func(*rand.Rand, int) int8) ([]int16, []int8) {
	q, rows := make([]int16, dim), make([]int8, n*dim)
	for i := range q {
		q[i] = int16(fq(rng, i))
	}
	for i := range rows {
		rows[i] = fr(rng, i)
	}
	return q, rows
}

func TestDot8RowsMatchesANaiveInt64Sum(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	for _, dim := range dot8Dims() {
		for _, n := range []int{1, 2, 3, 7, 64} {
			for _, f := range dot8Fills {
				q, rows := dot8Codes(rng, dim, n, f.q, f.r)
				// Garbage in out shows a result that adds to out instead
				// of writing it; the sentinel past n, a write past the end.
				out := make([]int32, n+1)
				for i := range out {
					out[i] = -12345
				}
				dot8Rows(q, rows, dim, n, out[:n])
				if out[n] != -12345 {
					t.Fatalf("dim %d n %d %s: out[%d] overwritten with %d", dim, n, f.name, n, out[n])
				}
				for r := range n {
					var want int64
					for i := range dim {
						want += int64(q[i]) * int64(rows[r*dim+i])
					}
					if int64(out[r]) != want {
						t.Fatalf("dim %d n %d %s row %d: %d, want %d", dim, n, f.name, r, out[r], want)
					}
				}
			}
		}
	}
	t.Logf("AVX2 in use: %v", useAVX2)
}

// The vector kernel against the portable prefix directly, over every
// prefix length the kernel takes for the dims of dot8Dims.
func TestDot8RowsVectorAndPortablePrefixesAgree(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2: dot8RowsPrefix is dot8RowsGo")
	}
	rng := rand.New(rand.NewSource(16))
	for _, dim := range dot8Dims() {
		d16 := dim &^ 15
		if d16 == 0 {
			continue
		}
		for _, n := range []int{1, 2, 3, 7, 64} {
			for _, f := range dot8Fills {
				q, rows := dot8Codes(rng, dim, n, f.q, f.r)
				vec, port := make([]int32, n), make([]int32, n)
				dot8RowsPrefix(q, rows, d16, dim, n, vec)
				dot8RowsGo(q, rows, d16, dim, n, port)
				for r := range n {
					if vec[r] != port[r] {
						t.Fatalf("dim %d n %d %s row %d: AVX2 %d, portable %d", dim, n, f.name, r, vec[r], port[r])
					}
				}
			}
		}
	}
}

// BenchmarkDot8Rows scores 4096 rows at precept's local embedder's size,
// in int8 codes and, for comparison, in float32 through dotRows.
func BenchmarkDot8Rows(b *testing.B) {
	const dim, n = 384, 4096
	rng := rand.New(rand.NewSource(1))
	q8, rows8 := dot8Codes(rng, dim, n, randomCode, randomCode)
	out8 := make([]int32, n)
	q32, rows32, out32 := make([]float32, dim), make([]float32, n*dim), make([]float32, n)
	for i := range q32 {
		q32[i] = float32(q8[i]) / 127
	}
	for i := range rows32 {
		rows32[i] = float32(rows8[i]) / 127
	}
	for _, bench := range []struct {
		name string
		run  func()
	}{
		{"int8", func() { dot8Rows(q8, rows8, dim, n, out8) }},
		{"int8-portable", func() { dot8RowsGo(q8, rows8, dim, dim, n, out8) }},
		{"float32", func() { dotRows(q32, rows32, n, out32) }},
	} {
		b.Run(fmt.Sprintf("%s/dim=%d", bench.name, dim), func(b *testing.B) {
			for b.Loop() {
				bench.run()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
		})
	}
}
