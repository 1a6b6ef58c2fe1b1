package chromem

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/precept-dev/precept/lib/vectorindex"
)

// checkPostings fails unless every pair lists exactly the rows holding
// it, in ascending order.
func checkPostings(t *testing.T, r *rows, step string) {
	t.Helper()
	want := map[uint32][]int32{}
	for i, ns := range r.meta {
		for _, n := range ns {
			want[n] = append(want[n], int32(i))
		}
	}
	for n := range r.post {
		if got := r.post.of(uint32(n)); !slices.Equal(got, want[uint32(n)]) {
			t.Fatalf("%s: pair %d (%v) lists rows %v, held by %v", step, n, r.pairs.table[n], got, want[uint32(n)])
		}
	}
	for n := range want {
		if int(n) >= len(r.post) {
			t.Fatalf("%s: pair %d held by %v has no list", step, n, want[n])
		}
	}
}

// Rows added, moved between clusters and deleted (the last row taking
// a deleted one's place) keep every pair's list exact.
func TestPostingsListTheRowsHoldingEachPair(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 4))
	r := newRows(16)
	v := func() []float32 {
		out := make([]float32, 16)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	meta := func() map[string]string {
		m := map[string]string{"agent": fmt.Sprint("a", rng.IntN(5)), "cluster_id": fmt.Sprint("c", rng.IntN(40))}
		if rng.IntN(4) == 0 {
			m["epic_id"] = fmt.Sprint("e", rng.IntN(3))
		}
		return m
	}
	var ids []string
	for step := range 3000 {
		switch op := rng.IntN(10); {
		case op < 6 || len(ids) == 0:
			id := fmt.Sprint("d", step)
			r.upsert(id, v(), meta(), 0, 0)
			ids = append(ids, id)
		case op < 8:
			r.upsert(ids[rng.IntN(len(ids))], v(), meta(), 0, 0)
		case op < 9:
			r.upsert(ids[rng.IntN(len(ids))], v(), nil, 0, 0)
		default:
			k := rng.IntN(len(ids))
			r.delete(ids[k])
			ids = slices.Delete(ids, k, k+1)
		}
		if step%97 == 0 {
			checkPostings(t, r, fmt.Sprint("step ", step))
		}
	}
	checkPostings(t, r, "at the end")
	for len(ids) > 0 {
		r.delete(ids[0])
		ids = ids[1:]
	}
	checkPostings(t, r, "emptied")
}

// A filtered query that scans its pair's rows answers exactly what the
// masked scan of every row answers, for single queries and batches that
// mix filters, with rows updated and deleted in between.
func TestListedScanAnswersAsTheMaskedScan(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 8))
	const dim = 64
	x, _, err := Open(t.TempDir(), vectorindex.Spec{Embedder: "chromem-test", Dimension: dim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	// Vectors near a few topics, so that thresholds leave some hits.
	topics := make([][]float32, 12)
	for i := range topics {
		topics[i] = make([]float32, dim)
		for d := range dim {
			topics[i][d] = float32(rng.NormFloat64())
		}
	}
	near := func() []float32 {
		c := topics[rng.IntN(len(topics))]
		out := make([]float32, dim)
		for d := range out {
			out[d] = c[d] + float32(0.6*rng.NormFloat64())
		}
		return out
	}
	var vs []vectorindex.Vector
	for i := range 6000 {
		vs = append(vs, vectorindex.Vector{ID: fmt.Sprintf("d%05d", i), Embedding: near(), Document: "doc",
			Metadata: map[string]string{"agent": fmt.Sprint("agent-", rng.IntN(20)), "cluster_id": fmt.Sprint("c", rng.IntN(300))}})
	}
	if err := x.Upsert(ctx, vs); err != nil {
		t.Fatal(err)
	}
	var gone []string
	for i := range 300 {
		gone = append(gone, fmt.Sprintf("d%05d", i*7))
	}
	if err := x.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	// An agent's rows are a twentieth of the rows: its queries take the
	// listed scan.
	if n, ok := x.rows.pairs.byPair[pair{"agent", "agent-3"}]; !ok || listShare*len(x.rows.post.of(n)) >= x.rows.len() {
		t.Fatalf("agent-3's queries would not take the listed scan")
	}
	compared, hits := 0, 0
	for round := range 30 {
		var qs []vectorindex.Query
		for range 1 + rng.IntN(12) {
			// Some limits hold every row of the filter, so that a row
			// the listed scan misses is missed from the answer.
			q := vectorindex.Query{Embedding: near(), Limit: []int{1 + rng.IntN(12), 400}[rng.IntN(2)], MinSimilarity: []float64{-1, 0, 0.5, 0.7, 0.8}[rng.IntN(5)]}
			switch rng.IntN(4) {
			case 0:
			case 1:
				q.Where = map[string]string{"cluster_id": fmt.Sprint("c", rng.IntN(300))}
			case 2:
				q.Where = map[string]string{"agent": fmt.Sprint("agent-", rng.IntN(20)), "cluster_id": fmt.Sprint("c", rng.IntN(300))}
			default:
				q.Where = map[string]string{"agent": fmt.Sprint("agent-", rng.IntN(21))}
			}
			qs = append(qs, q)
		}
		listed, err := x.QueryBatch(ctx, qs)
		if err != nil {
			t.Fatal(err)
		}
		listShare = math.MaxInt32
		masked, err := x.QueryBatch(ctx, qs)
		listShare = 4
		if err != nil {
			t.Fatal(err)
		}
		for k := range qs {
			compared++
			hits += len(masked[k])
			if !reflect.DeepEqual(listed[k], masked[k]) {
				t.Fatalf("round %d, query %d (%v, limit %d, min %.1f): listed scan %v, masked %v", round, k, qs[k].Where, qs[k].Limit, qs[k].MinSimilarity, ids(listed[k]), ids(masked[k]))
			}
		}
		// Move some rows between clusters and agents.
		var moved []vectorindex.Vector
		for range 50 {
			v := vs[rng.IntN(len(vs))]
			v.Metadata = map[string]string{"agent": fmt.Sprint("agent-", rng.IntN(20)), "cluster_id": fmt.Sprint("c", rng.IntN(300))}
			moved = append(moved, v)
		}
		if err := x.Upsert(ctx, moved); err != nil {
			t.Fatal(err)
		}
	}
	if hits < 2000 {
		t.Fatalf("only %d hits in %d queries: the comparison says little", hits, compared)
	}
	checkPostings(t, x.rows, "after the rounds")
}

func ids(hs []vectorindex.Hit) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.ID)
	}
	return out
}
