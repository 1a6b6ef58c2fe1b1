package chromem

import (
	"container/heap"
	"math"
	"runtime"
	"sort"
	"sync"
)

// flat keeps every vector in one contiguous slice, next to chromem-go's
// collection, for unfiltered queries: the evaluator's clustering query on
// every decision. chromem-go scans a map of separately allocated
// documents, takes a lock per candidate and multiplies element by element;
// at 100k vectors that is about 100 ms a query. A contiguous scan with an
// unrolled dot product over all cores does the same search in a few
// milliseconds. Filtered queries still go through chromem-go, which owns
// metadata and documents; the two are updated together under Index.mu.
type flat struct {
	dim  int
	ids  []string
	vecs []float32 // len(ids) * dim, row i belongs to ids[i]
	pos  map[string]int
}

func newFlat(dim int) *flat { return &flat{dim: dim, pos: map[string]int{}} }

// upsert stores v (normalised as chromem-go stores it) under id.
func (f *flat) upsert(id string, v []float32) {
	row := normalized(v)
	if i, ok := f.pos[id]; ok {
		copy(f.vecs[i*f.dim:(i+1)*f.dim], row)
		return
	}
	f.pos[id] = len(f.ids)
	f.ids = append(f.ids, id)
	f.vecs = append(f.vecs, row...)
}

// delete removes id, moving the last row into its place.
func (f *flat) delete(id string) {
	i, ok := f.pos[id]
	if !ok {
		return
	}
	last := len(f.ids) - 1
	if i != last {
		f.ids[i] = f.ids[last]
		f.pos[f.ids[i]] = i
		copy(f.vecs[i*f.dim:(i+1)*f.dim], f.vecs[last*f.dim:])
	}
	f.ids = f.ids[:last]
	f.vecs = f.vecs[:last*f.dim]
	delete(f.pos, id)
}

// scored is a candidate hit.
type scored struct {
	id  string
	sim float32
}

// worse orders hits: lower similarity is worse, and among equal
// similarities the larger id (the contract orders ties by id ascending).
func worse(a, b scored) bool {
	if a.sim != b.sim {
		return a.sim < b.sim
	}
	return a.id > b.id
}

// topHeap is a min-heap of the best hits so far; its root is the worst.
type topHeap []scored

func (h topHeap) Len() int           { return len(h) }
func (h topHeap) Less(i, j int) bool { return worse(h[i], h[j]) }
func (h topHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *topHeap) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *topHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// minParallelRows is the size from which a scan is split across cores.
const minParallelRows = 4096

// search returns the n best rows with similarity ≥ minSim, best first, ties
// by id ascending: exactly the contract's order, with no re-fetching.
func (f *flat) search(q []float32, n int, minSim float32) []scored {
	q = normalized(q)
	rows := len(f.ids)
	if n <= 0 || rows == 0 {
		return nil
	}
	workers := 1
	if rows >= minParallelRows {
		workers = runtime.GOMAXPROCS(0)
	}
	parts := make([]topHeap, workers)
	var wg sync.WaitGroup
	chunk := (rows + workers - 1) / workers
	for w := range workers {
		lo, hi := w*chunk, min(rows, (w+1)*chunk)
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := make(topHeap, 0, n+1)
			var sims [256]float32
			for block := lo; block < hi; block += len(sims) {
				k := min(len(sims), hi-block)
				dotRows(q, f.vecs[block*f.dim:(block+k)*f.dim], k, sims[:k])
				for j, sim := range sims[:k] {
					if sim < minSim {
						continue
					}
					c := scored{f.ids[block+j], sim}
					if len(h) < n {
						heap.Push(&h, c)
					} else if worse(h[0], c) {
						h[0] = c
						heap.Fix(&h, 0)
					}
				}
			}
			parts[w] = h
		}()
	}
	wg.Wait()
	var all []scored
	for _, p := range parts {
		all = append(all, p...)
	}
	sort.Slice(all, func(i, j int) bool { return worse(all[j], all[i]) })
	if len(all) > n {
		all = all[:n]
	}
	return all
}

// normalized returns v scaled to unit length, as chromem-go stores
// vectors (a copy when it has to scale).
func normalized(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if math.Abs(sum-1) < 1e-6 || sum == 0 {
		return v
	}
	n := float32(1 / math.Sqrt(sum))
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x * n
	}
	return out
}
