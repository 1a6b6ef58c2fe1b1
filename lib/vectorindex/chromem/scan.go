package chromem

import (
	"container/heap"
	"math"
	"runtime"
	"sort"
	"sync"
)

// minParallelRows is the size from which a scan is split across cores.
const minParallelRows = 4096

// scanBlock is how many rows the scan scores per kernel call; chunkRows is
// a multiple of it. A block of codes (64 KiB at 256 dimensions) stays in
// the core's cache while every query of a batch is scored against it, so
// a batch reads the rows from memory once (docs/decisions/0003,
// "Batched queries").
const scanBlock = 256

// search is one query of a scan: its probe, how many hits it wants, the
// similarity below which a row is of no use, and the metadata pairs a row
// must hold (nil: any row).
type search struct {
	p     probe
	n     int
	floor float64
	want  []uint32
}

// candidates returns for each search, in no particular order, every row
// that may be among its n most similar with a similarity of at least its
// floor: those whose upper bound reaches floor and reaches the n-th best
// lower bound. A row left out has n others certainly more similar, or is
// certainly below floor. The rows are read once for all searches.
func (r *rows) candidates(searches []search) [][]int32 {
	out := make([][]int32, len(searches))
	total := len(r.ids)
	if total == 0 {
		return out
	}
	// No search wants more rows than there are: a huge limit must not
	// size a heap.
	ss := make([]search, len(searches))
	for k, s := range searches {
		ss[k] = s
		ss[k].n = max(0, min(s.n, total))
	}
	// A batch is split across cores when its rows times its queries
	// are worth it, as a single query is from minParallelRows rows.
	workers := 1
	if total*len(ss) >= minParallelRows {
		workers = runtime.GOMAXPROCS(0)
	}
	parts := make([][]scanned, workers)
	var wg sync.WaitGroup
	// Each worker scans whole blocks, which never straddle a chunk.
	blocks := (total + scanBlock - 1) / scanBlock
	per := (blocks + workers - 1) / workers
	for w := range workers {
		lo, hi := min(total, w*per*scanBlock), min(total, (w+1)*per*scanBlock)
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[w] = r.scan(ss, lo, hi)
		}()
	}
	wg.Wait()
	for k, s := range ss {
		n := s.n
		if n == 0 {
			continue
		}
		var lows []float64
		for _, part := range parts {
			lows = append(lows, part[k].lows...)
		}
		cut := math.Inf(-1)
		if len(lows) >= n {
			sort.Sort(sort.Reverse(sort.Float64Slice(lows)))
			cut = lows[n-1]
		}
		for _, part := range parts {
			for _, c := range part[k].found {
				if c.up >= cut {
					out[k] = append(out[k], c.row)
				}
			}
		}
	}
	return out
}

// scanned is what a worker's scan found for one search: the n best lower
// bounds among its rows that can reach the floor, and the rows whose
// upper bound reached both the floor and the n-th best lower bound seen
// so far.
type scanned struct {
	lows  lowHeap
	found []bounded
}

// bounded is a row that survived the scan with its upper bound.
type bounded struct {
	row int32
	up  float64
}

// scan bounds rows lo..hi-1 for every search, block by block.
func (r *rows) scan(ss []search, lo, hi int) []scanned {
	out := make([]scanned, len(ss))
	for k, s := range ss {
		out[k].lows = make(lowHeap, 0, s.n+1)
	}
	var dots [scanBlock]int32
	for block := lo; block < hi; block += scanBlock {
		k := min(scanBlock, hi-block)
		c, first := block/chunkRows, block%chunkRows
		codes := r.codes[c][first*r.dim : (first+k)*r.dim]
		for q := range ss {
			s, o := &ss[q], &out[q]
			if s.n == 0 {
				continue
			}
			dot8Rows(s.p.codes, codes, r.dim, k, dots[:k])
			for j, dot := range dots[:k] {
				row := block + j
				if s.want != nil && !holds(r.meta[row], s.want) {
					continue
				}
				approx, err := s.p.bounds(r.head[row], dot)
				up, low := approx+err, approx-err
				// Written so that a NaN, which no row should hold but a
				// comparison must not let into the heap, is skipped.
				if !(up >= s.floor) {
					continue
				}
				if len(o.lows) < s.n {
					heap.Push(&o.lows, low)
				} else if low > o.lows[0] {
					o.lows[0] = low
					heap.Fix(&o.lows, 0)
				}
				if len(o.lows) == s.n && up < o.lows[0] {
					continue
				}
				o.found = append(o.found, bounded{int32(row), up})
			}
		}
	}
	return out
}

// lowHeap is a min-heap of the best lower bounds so far; its root is the
// n-th best.
type lowHeap []float64

func (h lowHeap) Len() int           { return len(h) }
func (h lowHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h lowHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lowHeap) Push(x any)        { *h = append(*h, x.(float64)) }
func (h *lowHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
