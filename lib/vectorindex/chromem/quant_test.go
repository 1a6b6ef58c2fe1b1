package chromem

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"testing"

	"github.com/precept-dev/precept/lib/vectorindex"
)

// shapes are the vector distributions the bounds must hold on: dense,
// sparse, one large coordinate among small ones, and near-constant.
var shapes = map[string]func(rng *rand.Rand, dim int) []float32{
	"gaussian": func(rng *rand.Rand, dim int) []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	},
	"sparse": func(rng *rand.Rand, dim int) []float32 {
		v := make([]float32, dim)
		for range 1 + dim/20 {
			v[rng.Intn(dim)] = float32(rng.NormFloat64())
		}
		v[0] += 0.01
		return v
	},
	"spike": func(rng *rand.Rand, dim int) []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.01)
		}
		v[rng.Intn(dim)] = 5
		return v
	},
	// concepts is shaped like precept's local embedder: a constant
	// and one or two of twelve concept dimensions in the first half,
	// hashed words, small, in the second.
	"concepts": func(rng *rand.Rand, dim int) []float32 {
		v := make([]float32, dim)
		from := split(dim)
		if from < 13 {
			from = dim // too small for a second half
		}
		v[from-1] = 1.1
		for range 1 + rng.Intn(2) {
			v[rng.Intn(min(12, from-1)+1)] += 0.9
		}
		for range 6 {
			if from < dim {
				v[from+rng.Intn(dim-from)] += float32(rng.NormFloat64() * 0.15)
			}
		}
		return v
	},
	"flat": func(rng *rand.Rand, dim int) []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = 1 + float32(rng.Float64()*1e-3)
		}
		return v
	},
}

func TestQuantizeBoundsItsResidual(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for name, shape := range shapes {
		for _, dim := range []int{1, 3, 37, 384, 1024} {
			for range 200 {
				v := normalized(shape(rng, dim))
				codes := make([]int8, dim)
				h := quantize(v, codes)
				var sq float64
				for i, c := range codes {
					if c < -maxCode || c > maxCode {
						t.Fatalf("%s/%d: code %d out of range", name, dim, c)
					}
					d := float64(v[i]) - float64(h.scale)*float64(c)
					if i == int(h.outIdx) {
						if c != 0 || h.outVal != v[i] {
							t.Fatalf("%s/%d: component %d kept as %v with code %d, is %v", name, dim, i, h.outVal, c, v[i])
						}
						d = 0
					}
					sq += d * d
				}
				if math.Sqrt(sq) > float64(h.resid) {
					t.Fatalf("%s/%d: residual %g exceeds its bound %g", name, dim, math.Sqrt(sq), h.resid)
				}
			}
		}
	}
}

// The bound must contain the float32 kernel's similarity for every pair,
// including nearly parallel ones, where the kernel's own rounding counts.
func TestTheScanBoundContainsTheExactSimilarity(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for name, shape := range shapes {
		for _, dim := range []int{5, 64, 384, 1000} {
			for range 100 {
				q := normalized(shape(rng, dim))
				v := shape(rng, dim)
				if rng.Intn(2) == 0 {
					v = make([]float32, dim) // nearly q itself
					for i := range v {
						v[i] = q[i] + float32(rng.NormFloat64()*1e-4)
					}
				}
				v = normalized(v)
				codes := make([]int8, dim)
				h := quantize(v, codes)
				p := newProbe(q)
				var dot [1]int32
				dot8Rows(p.codes, codes, dim, 1, dot[:])
				approx, bound := p.bounds(h, dot[0])
				var exact [1]float32
				dotRows(q, v, 1, exact[:])
				if d := math.Abs(float64(exact[0]) - approx); d > bound {
					t.Fatalf("%s/%d: exact %.9f, approximate %.9f: off by %g, bound %g", name, dim, exact[0], approx, d, bound)
				}
				// The first stage's bound, from the head's codes and
				// the tails' lengths, is above it too.
				if from := split(dim); from > 0 {
					var head [1]int32
					dot8RowsPrefix(p.codes[:from], codes, from, dim, 1, head[:])
					// With cut at the exact similarity, the row must be
					// kept: its bound is at least that.
					live := []bool{true}
					if kept := p.firstStage([]rowHead{h}, []float32{tailNorm(v, from)}, head[:], live, from, float64(exact[0]), nil); len(kept) != 1 || !live[0] {
						t.Fatalf("%s/%d: exact %.9f above the first stage's bound", name, dim, exact[0])
					}
				}
			}
		}
	}
}

// expected is what an exhaustive float32 scan answers: the contract's
// order, the kernel's similarities.
func expected(vs map[string][]float32, q []float32, limit int, minSim float64, keep func(string) bool) []vectorindex.Hit {
	qn := normalized(q)
	var all []scored
	floor := float32(minSim) - 1e-6
	for id, v := range vs {
		if keep != nil && !keep(id) {
			continue
		}
		var s [1]float32
		dotRows(qn, normalized(v), 1, s[:])
		if s[0] >= floor {
			all = append(all, scored{id, s[0]})
		}
	}
	sort.Slice(all, func(i, j int) bool { return worse(all[j], all[i]) })
	var out []vectorindex.Hit
	for _, s := range all[:min(limit, len(all))] {
		if sim := vectorindex.ClampSimilarity(float64(s.sim)); sim >= minSim {
			out = append(out, vectorindex.Hit{ID: s.id, Similarity: sim})
		}
	}
	return out
}

// Every answer, filtered or not, must be the float32 answer exactly:
// same hits, same order, bit-identical similarities. Tight groups of
// near-duplicates and exact duplicates put many rows inside each other's
// bounds, which is where a wrong bound or a lost candidate would show.
func TestQueriesEqualAnExhaustiveFloat32Scan(t *testing.T) {
	// 96 is a whole number of the float32 kernel's 32 lanes; 45 leaves a
	// tail it adds one by one (and the scan's second stage a tail of 29
	// past split(45) = 16). Gaussian queries skip the scan's first stage;
	// concept-shaped ones run it.
	for _, shape := range []string{"gaussian", "concepts"} {
		for _, dim := range []int{96, 45} {
			t.Run(fmt.Sprint(shape, dim), func(t *testing.T) { queriesEqualAnExhaustiveScan(t, dim, shape) })
		}
	}
}

func queriesEqualAnExhaustiveScan(t *testing.T, dim int, shape string) {
	spec := vectorindex.Spec{Embedder: "test", Dimension: dim}
	dir := t.TempDir()
	idx, _, err := Open(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(7))
	ctx := context.Background()
	stored := map[string][]float32{}
	group := map[string]string{}
	var vs []vectorindex.Vector
	add := func(id string, v []float32) {
		g := fmt.Sprint(len(vs) % 3)
		vs = append(vs, vectorindex.Vector{ID: id, Embedding: v, Metadata: map[string]string{"g": g}, Document: "doc " + id})
		stored[id], group[id] = v, g
	}
	for i := range 6000 {
		add(fmt.Sprintf("r%05d", i), shapes[shape](rng, spec.Dimension))
	}
	centre := shapes[shape](rng, spec.Dimension)
	for i := range 300 {
		v := make([]float32, spec.Dimension)
		for j := range v {
			v[j] = centre[j] + float32(rng.NormFloat64()*0.02)
		}
		add(fmt.Sprintf("near%03d", i), v)
	}
	for i := range 20 {
		add(fmt.Sprintf("dup%02d", i), centre)
	}
	if err := idx.Upsert(ctx, vs); err != nil {
		t.Fatal(err)
	}
	gone := []string{"r00010", "near007", "dup03"}
	if err := idx.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	for _, id := range gone {
		delete(stored, id)
	}
	check := func(idx *Index) {
		t.Helper()
		type asked struct {
			q    vectorindex.Query
			want []vectorindex.Hit
			name string
		}
		var all []asked
		queries := [][]float32{centre, stored["near100"], stored["r00042"], shapes[shape](rng, spec.Dimension)}
		for qi, q := range queries {
			for _, limit := range []int{1, 10, 25, 400} {
				for _, minSim := range []float64{-1, 0, 0.5, 0.95} {
					for _, g := range []string{"", "1"} {
						query := vectorindex.Query{Embedding: q, Limit: limit, MinSimilarity: minSim}
						var keep func(string) bool
						if g != "" {
							query.Where = map[string]string{"g": g}
							keep = func(id string) bool { return group[id] == g }
						}
						name := fmt.Sprintf("query %d limit %d min %v filter %q", qi, limit, minSim, g)
						all = append(all, asked{query, expected(stored, q, limit, minSim, keep), name})
					}
				}
			}
		}
		same := func(how string, a asked, got []vectorindex.Hit) {
			t.Helper()
			if len(got) != len(a.want) {
				t.Fatalf("%s, %s: %d hits, want %d", how, a.name, len(got), len(a.want))
			}
			for i := range got {
				if got[i].ID != a.want[i].ID || got[i].Similarity != a.want[i].Similarity || got[i].Document != "doc "+got[i].ID || got[i].Metadata["g"] != group[got[i].ID] {
					t.Fatalf("%s, %s, hit %d: %s %.9f %q, want %s %.9f", how, a.name, i, got[i].ID, got[i].Similarity, got[i].Document, a.want[i].ID, a.want[i].Similarity)
				}
			}
		}
		batch := make([]vectorindex.Query, len(all))
		for k, a := range all {
			got, err := idx.Query(ctx, a.q)
			if err != nil {
				t.Fatal(err)
			}
			same("alone", a, got)
			batch[k] = a.q
		}
		// All of them in one batch, which reads each block of rows once.
		got, err := idx.QueryBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for k, a := range all {
			same("in a batch", a, got[k])
		}
	}
	check(idx)
	mustClose(t, idx)
	idx, _ = openT(t, dir, spec)
	defer mustClose(t, idx)
	check(idx)
}

// The scan must rule out almost every row, or the exact re-score would
// read the whole journal: at 20,000 vectors of 384 dimensions a query
// for its 10 nearest re-scores a few dozen.
func TestTheScanRescoresFewRows(t *testing.T) {
	const n, dim = 20000, 384
	r := newRows(dim)
	rng := rand.New(rand.NewSource(3))
	for i := range n {
		r.upsert(fmt.Sprint(i), shapes["gaussian"](rng, dim), nil, 0, 0)
	}
	var total int
	for range 20 {
		c := r.candidates([]search{{p: newProbe(normalized(shapes["gaussian"](rng, dim))), n: 10, floor: -1}})[0]
		if len(c) < 10 {
			t.Fatalf("%d candidates for 10 hits", len(c))
		}
		total += len(c)
	}
	if mean := total / 20; mean > n/100 {
		t.Errorf("a query re-scores %d of %d rows on average; want under 1%%", mean, n)
	}
	t.Logf("mean candidates per query: %d of %d", total/20, n)
}

// A query's codes are as large as queryTop allows: at the extremes of
// both sides, at every dimension up to the largest, no sum may wrap.
func TestQueryCodesAtTheirLimitDoNotOverflow(t *testing.T) {
	for _, dim := range []int{1, 16, 384, 1536, 16913, vectorindex.MaxDimension} {
		top := queryTop(dim)
		if top < maxCode {
			t.Fatalf("dim %d: query codes coarser (±%d) than a row's", dim, top)
		}
		for _, sign := range []int16{1, -1} {
			q := make([]int16, dim)
			row := make([]int8, dim)
			for i := range q {
				q[i], row[i] = int16(top)*sign, maxCode
			}
			var got [1]int32
			dot8Rows(q, row, dim, 1, got[:])
			if want := int64(sign) * int64(top) * maxCode * int64(dim); int64(got[0]) != want {
				t.Fatalf("dim %d: %d, want %d", dim, got[0], want)
			}
		}
	}
}

// Identical comments embed identically, and no bound separates identical
// rows: each distinct vector among the candidates is read and scored
// once, and every copy still comes back, ties by ID.
func TestIdenticalVectorsAreReadOnce(t *testing.T) {
	spec := vectorindex.Spec{Embedder: "test", Dimension: 64}
	idx, _ := openT(t, t.TempDir(), spec)
	rng := rand.New(rand.NewSource(5))
	same := shapes["gaussian"](rng, spec.Dimension)
	stored := map[string][]float32{}
	var vs []vectorindex.Vector
	for i := range 3000 {
		id, v := fmt.Sprintf("same%04d", i), same
		if i%3 == 0 {
			id, v = fmt.Sprintf("other%04d", i), shapes["gaussian"](rng, spec.Dimension)
		}
		vs = append(vs, vectorindex.Vector{ID: id, Embedding: v})
		stored[id] = v
	}
	mustUpsert(t, idx, vs)
	before := idx.Stats()
	got, err := idx.Query(context.Background(), vectorindex.Query{Embedding: same, Limit: 50, MinSimilarity: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	want := expected(stored, same, 50, 0.5, nil)
	if len(got) != 50 || len(want) != 50 {
		t.Fatalf("%d hits, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Similarity != want[i].Similarity {
			t.Fatalf("hit %d: %s %v, want %s %v", i, got[i].ID, got[i].Similarity, want[i].ID, want[i].Similarity)
		}
	}
	if read := idx.Stats().Rescored - before.Rescored; read > 10 {
		t.Errorf("re-scored %d vectors for one distinct vector among 2,000 copies", read)
	}
}

// The scan's first stage bounds a row from the first half of its codes
// and the length of its tail. On concept-shaped vectors it must rule out
// most rows of a query at 0.8, and never one whose exact similarity
// reaches 0.8.
func TestTheFirstStageRulesOutRowsWithoutLosingAny(t *testing.T) {
	const dim, n, floor = 256, 8192, 0.8
	rng := rand.New(rand.NewSource(11))
	r := newRows(dim)
	vs := make([][]float32, n)
	for i := range vs {
		vs[i] = normalized(shapes["concepts"](rng, dim))
		r.upsert(fmt.Sprint(i), vs[i], nil, 0, 0)
	}
	live, reach := 0, 0
	for qi := range 20 {
		q := normalized(shapes["concepts"](rng, dim))
		s := search{p: newProbe(q), n: n, floor: floor}
		if s.p.tail > maxStagedTail {
			t.Fatalf("query %d: tail %.2f, the first stage would not run", qi, s.p.tail)
		}
		var dots [scanBlock]int32
		var keep [scanBlock]bool
		for b := 0; b < n; b += scanBlock {
			c, first := b/chunkRows, b%chunkRows
			blk := block{codes: r.codes[c][first*dim : (first+scanBlock)*dim], heads: r.head[b : b+scanBlock], tails: r.tail[b : b+scanBlock], base: b}
			r.score(&s, &blk, floor, dots[:], keep[:])
			for j := range scanBlock {
				exact := float64(dot(q, vs[b+j]))
				if exact >= floor-1e-6 {
					reach++
					if !keep[j] {
						t.Fatalf("query %d: row %d at %.6f was ruled out at %.1f", qi, b+j, exact, floor)
					}
				}
				if keep[j] {
					live++
					var want int32
					code := r.code(b + j)
					for d := range dim {
						want += int32(s.p.codes[d]) * int32(code[d])
					}
					if dots[j] != want {
						t.Fatalf("query %d: row %d kept with dot %d, want the full %d", qi, b+j, dots[j], want)
					}
				}
			}
		}
	}
	if reach == 0 {
		t.Fatal("no row reaches the floor: the test checks nothing")
	}
	if total := 20 * n; live*2 > total {
		t.Errorf("the first stage kept %d of %d rows (%d reach the floor), want under half", live, total, reach)
	}
	t.Logf("kept %d of %d rows; %d reach the floor", live, 20*n, reach)
}
