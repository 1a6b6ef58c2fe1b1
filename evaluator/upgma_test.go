package evaluator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/precept-dev/precept/lib/vectorindex"
)

// naiveUPGMA merges the most similar pair of clusters (mean pairwise
// similarity of their members) while it reaches threshold: the definition,
// O(n³), to check upgma against.
func naiveUPGMA(vecs [][]float32, threshold float64) [][]int {
	var cl [][]int
	for i := range vecs {
		cl = append(cl, []int{i})
	}
	mean := func(a, b []int) float64 {
		var s float64
		for _, i := range a {
			for _, j := range b {
				s += dot(vecs[i], vecs[j])
			}
		}
		return s / float64(len(a)*len(b))
	}
	for {
		bi, bj, best := -1, -1, threshold
		for i := range cl {
			for j := i + 1; j < len(cl); j++ {
				if s := mean(cl[i], cl[j]); s >= best {
					bi, bj, best = i, j, s
				}
			}
		}
		if bi < 0 {
			break
		}
		cl[bi] = append(cl[bi], cl[bj]...)
		cl = slices.Delete(cl, bj, bj+1)
	}
	for _, c := range cl {
		slices.Sort(c)
	}
	slices.SortFunc(cl, func(a, b []int) int { return a[0] - b[0] })
	return cl
}

// clusteredVectors makes n unit vectors around k centres.
func clusteredVectors(rng *rand.Rand, n, k, dim int, spread float64) [][]float32 {
	centres := make([][]float32, k)
	for i := range centres {
		centres[i] = make([]float32, dim)
		for d := range dim {
			centres[i][d] = float32(rng.NormFloat64())
		}
	}
	out := make([][]float32, n)
	for i := range out {
		c := centres[rng.IntN(k)]
		v := make([]float32, dim)
		for d := range dim {
			v[d] = c[d] + float32(spread*rng.NormFloat64())
		}
		out[i] = vectorindex.Normalized(v)
	}
	return out
}

func TestUPGMAMatchesTheDefinitionAndIgnoresOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := range 20 {
		vecs := clusteredVectors(rng, 40+trial, 6, 16, 0.6)
		for _, threshold := range []float64{0.3, 0.5, 0.7} {
			want := naiveUPGMA(vecs, threshold)
			got := partition(upgma(vecs, nil, nil, threshold))
			if !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("trial %d threshold %v:\n got %v\nwant %v", trial, threshold, got, want)
			}
			// The same vectors in another order give the same clusters.
			perm := rng.Perm(len(vecs))
			shuffled := make([][]float32, len(vecs))
			for i, p := range perm {
				shuffled[i] = vecs[p]
			}
			back := upgma(shuffled, nil, nil, threshold)
			orig := make([]int, len(vecs))
			for i, p := range perm {
				orig[p] = back[i]
			}
			if !slices.EqualFunc(partition(orig), want, slices.Equal) {
				t.Fatalf("trial %d threshold %v: order changed the clusters", trial, threshold)
			}
		}
	}
}

func TestUPGMAKeepsApartAndTogether(t *testing.T) {
	// Three near-identical vectors and one opposite: apart keeps 0 and 1
	// apart; a weighted unit (2 vectors summed) counts as their mean.
	a := []float32{1, 0}
	b := []float32{0.99, 0.141}
	got := partition(upgma([][]float32{a, b, a, {-1, 0}}, nil, [][2]int{{0, 1}}, 0.5))
	for _, p := range got {
		if slices.Contains(p, 0) && slices.Contains(p, 1) {
			t.Fatalf("apart units share a cluster: %v", got)
		}
	}
	// A unit of two vectors summed to (2, 0) is as similar to a as a is.
	got = partition(upgma([][]float32{{2, 0}, a}, []int{2, 1}, nil, 0.99))
	if len(got) != 1 {
		t.Fatalf("a weighted unit did not merge with its twin: %v", got)
	}
}

// The similarity matrix of a large group is filled on every core, and is
// the one a single core fills, entry for entry, at any core count.
func TestSimilaritiesFilledInParallelEqualOneCoresFill(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 512))
	for _, n := range []int{parallelFrom - 1, parallelFrom, 1337} {
		wide := widen(clusteredVectors(rng, n, 9, 40, 0.4))
		size := make([]float64, n)
		for i := range size {
			size[i] = float64(1 + rng.IntN(5))
		}
		want := make([][]float32, n)
		for i := range want {
			want[i] = make([]float32, i)
			for j := range i {
				want[i][j] = float32(dot64(wide[i], wide[j]) / (size[i] * size[j]))
			}
		}
		for _, procs := range []int{1, 2, 3, 8} {
			func() {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				got := make([][]float32, n)
				fillSimilarities(got, wide, size)
				for i := range want {
					if !slices.Equal(got[i], want[i]) {
						t.Fatalf("n %d, %d cores: row %d differs", n, procs, i)
					}
				}
			}()
		}
	}
}

// BenchmarkUPGMA clusters a group of maxExactGroup/2 decisions, the
// size a pass still clusters decision by decision, on every core and on
// one.
func BenchmarkUPGMA(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 2000))
	vecs := clusteredVectors(rng, maxExactGroup/2, 60, 280, 0.5)
	for _, procs := range []int{runtime.GOMAXPROCS(0), 1} {
		b.Run(fmt.Sprintf("cores=%d", procs), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			for range b.N {
				upgma(vecs, nil, nil, 0.8)
			}
		})
	}
}

// dot64 sums in one order on every machine: the AVX2 kernel equals the
// portable sum to the bit, at every length and on values of every size.
func TestDot64IsTheSameSumWithAndWithoutAVX2(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 64))
	for n := range 300 {
		a, b := make([]float64, n), make([]float64, n)
		for i := range a {
			a[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(13)-6))
			b[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(13)-6))
		}
		n16 := n &^ 15
		want := dot64Head(a[:n16], b[:n16])
		for i := n16; i < n; i++ {
			want += float64(a[i] * b[i])
		}
		if got := dot64(a, b); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("n %d (AVX2 %v): %v, want %v", n, useAVX2, got, want)
		}
		// The sum is the dot product, to rounding.
		var exact float64
		for i := range a {
			exact += a[i] * b[i]
		}
		if math.Abs(dot64(a, b)-exact) > 1e-9*(1+math.Abs(exact)) {
			t.Fatalf("n %d: %v, the plain sum %v", n, dot64(a, b), exact)
		}
	}
	if !useAVX2 {
		t.Log("no AVX2 here: only the portable sum was compared")
	}
}
