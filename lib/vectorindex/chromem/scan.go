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

// A filtered search scans the rows of its rarest pair when fewer than
// 1/listShare of the rows hold it: gathering a listed row's codes costs
// about as much as scoring it, so a list as long as a quarter of the
// rows gains little over the masked scan of every row. Tests make it
// huge to compare with the masked scan.
var listShare = 4

// scanBlock is how many rows the scan scores per kernel call; chunkRows is
// a multiple of it. A block of codes (64 KiB at 256 dimensions) stays in
// the core's cache while every query of a batch is scored against it, so
// a batch reads the rows from memory once (docs/decisions/0003,
// "Batched queries").
const scanBlock = 256

// firstStage numbers a block's rows in a byte.
const _ = uint8(scanBlock - 1)

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
// certainly below floor. A search filtered by metadata whose rarest pair
// is held by fewer than a quarter of the rows scans that pair's rows
// only (postings.go); the others read every row, once for all of them.
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
	var every []int
	listed := map[uint32][]int{}
	for k, s := range ss {
		if s.n == 0 {
			continue
		}
		if n, ok := r.rarest(s.want); ok && listShare*len(r.post.of(n)) < total {
			listed[n] = append(listed[n], k)
		} else {
			every = append(every, k)
		}
	}
	parts := make([][]scanned, len(ss))
	r.scanParts(ss, every, nil, parts)
	for n, idx := range listed {
		r.scanParts(ss, idx, r.post.of(n), parts)
	}
	for k, s := range ss {
		n := s.n
		if n == 0 {
			continue
		}
		var lows []float64
		for _, part := range parts[k] {
			lows = append(lows, part.lows...)
		}
		cut := math.Inf(-1)
		if len(lows) >= n {
			sort.Sort(sort.Reverse(sort.Float64Slice(lows)))
			cut = lows[n-1]
		}
		for _, part := range parts[k] {
			for _, c := range part.found {
				if c.up >= cut {
					out[k] = append(out[k], c.row)
				}
			}
		}
	}
	return out
}

// rarest is the pair of want held by the fewest rows; false without
// want.
func (r *rows) rarest(want []uint32) (uint32, bool) {
	best, ok := uint32(0), false
	for _, n := range want {
		if !ok || len(r.post.of(n)) < len(r.post.of(best)) {
			best, ok = n, true
		}
	}
	return best, ok
}

// scanParts scans for the searches ss[idx] every row (list nil) or the
// rows of list, split across cores when the rows times the searches are
// worth it, as a single search is from minParallelRows rows, and adds
// each worker's findings to parts.
func (r *rows) scanParts(ss []search, idx []int, list []int32, parts [][]scanned) {
	if len(idx) == 0 {
		return
	}
	sub := make([]search, len(idx))
	for i, k := range idx {
		sub[i] = ss[k]
	}
	n := len(r.ids)
	if list != nil {
		n = len(list)
	}
	workers := 1
	if n*len(sub) >= minParallelRows {
		workers = runtime.GOMAXPROCS(0)
	}
	found := make([][]scanned, workers)
	var wg sync.WaitGroup
	// Each worker scans whole blocks, which never straddle a chunk.
	blocks := (n + scanBlock - 1) / scanBlock
	per := (blocks + workers - 1) / workers
	for w := range workers {
		lo, hi := min(n, w*per*scanBlock), min(n, (w+1)*per*scanBlock)
		wg.Go(func() {
			if list == nil {
				found[w] = r.scan(sub, lo, hi)
			} else {
				found[w] = r.scanList(sub, list[lo:hi])
			}
		})
	}
	wg.Wait()
	for i, k := range idx {
		for w := range workers {
			parts[k] = append(parts[k], found[w][i])
		}
	}
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

// block is up to scanBlock rows scored together: rows base.. in place
// (rows nil), or the rows listed, their codes, heads and tails gathered.
type block struct {
	codes []int8
	heads []rowHead
	tails []float32
	base  int
	rows  []int32
}

func (b *block) row(j int) int {
	if b.rows == nil {
		return b.base + j
	}
	return int(b.rows[j])
}

func newScanned(ss []search) []scanned {
	out := make([]scanned, len(ss))
	for k, s := range ss {
		out[k].lows = make(lowHeap, 0, s.n+1)
	}
	return out
}

// scan bounds rows lo..hi-1 for every search, block by block.
func (r *rows) scan(ss []search, lo, hi int) []scanned {
	out := newScanned(ss)
	for b := lo; b < hi; b += scanBlock {
		k := min(scanBlock, hi-b)
		c, first := b/chunkRows, b%chunkRows
		blk := block{codes: r.codes[c][first*r.dim : (first+k)*r.dim], heads: r.head[b : b+k], tails: r.tail[b : b+k], base: b}
		r.bound(ss, out, &blk)
	}
	return out
}

// scanList bounds the rows of list for every search, scanBlock rows at
// a time gathered into one block: a row's codes are copied once for all
// the searches.
func (r *rows) scanList(ss []search, list []int32) []scanned {
	out := newScanned(ss)
	codes := make([]int8, scanBlock*r.dim)
	var heads [scanBlock]rowHead
	var tails [scanBlock]float32
	for i := 0; i < len(list); i += scanBlock {
		rows := list[i:min(len(list), i+scanBlock)]
		for j, row := range rows {
			copy(codes[j*r.dim:(j+1)*r.dim], r.code(int(row)))
			heads[j], tails[j] = r.head[row], r.tail[row]
		}
		k := len(rows)
		blk := block{codes: codes[:k*r.dim], heads: heads[:k], tails: tails[:k], rows: rows}
		r.bound(ss, out, &blk)
	}
	return out
}

// bound bounds a block's rows for every search.
func (r *rows) bound(ss []search, out []scanned, blk *block) {
	var dots [scanBlock]int32
	var live [scanBlock]bool
	k := len(blk.heads)
	for q := range ss {
		s, o := &ss[q], &out[q]
		if s.n == 0 {
			continue
		}
		cut := s.floor
		if len(o.lows) == s.n {
			cut = max(cut, o.lows[0])
		}
		r.score(s, blk, cut, dots[:k], live[:k])
		for j, dot := range dots[:k] {
			if !live[j] {
				continue
			}
			approx, err := s.p.bounds(blk.heads[j], dot)
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
			o.found = append(o.found, bounded{int32(blk.row(j)), up})
		}
	}
}

// maxStagedTail is the largest query tail length (past split) for which
// the scan runs its first stage. An embedder whose vectors keep most of
// their length in the first half (precept's local embedder puts its
// concepts and calibration in the first 104 of 256 dimensions, words
// after) lets the first stage rule out most rows at half the cost; one
// that spreads it evenly (a tail of about 0.7) would gain nothing, and
// its queries skip the stage.
const maxStagedTail = 0.5

// score writes to dots the integer dot product of the probe with each of
// the block's rows, and marks in live the rows to bound further: those
// holding the search's metadata pairs, and, when the first stage runs,
// whose first-stage bound reaches cut (the floor, or the n-th best lower
// bound so far once there are n). A row not live is certainly below
// cut, so leaving it out changes no answer; the dot products of live
// rows are the full ones, whatever the stage.
func (r *rows) score(s *search, blk *block, cut float64, dots []int32, live []bool) {
	k, codes := len(blk.heads), blk.codes
	if s.want == nil {
		for j := range live {
			live[j] = true
		}
	} else {
		for j := range live {
			live[j] = holds(r.meta[blk.row(j)], s.want)
		}
	}
	from := split(r.dim)
	if from == 0 || s.p.tail > maxStagedTail {
		dot8Rows(s.p.codes, codes, r.dim, k, dots)
		return
	}
	dot8RowsPrefix(s.p.codes[:from], codes, from, r.dim, k, dots)
	var kept [scanBlock]uint8
	survivors := s.p.firstStage(blk.heads, blk.tails, dots, live, from, cut, kept[:0])
	if len(survivors) == 0 {
		return
	}
	var tail [scanBlock]int32
	if 4*len(survivors) >= k {
		// Most rows go on: the rest of the block in one call.
		dot8Tail(s.p.codes, codes, r.dim, from, k, tail[:k])
		for _, j := range survivors {
			dots[j] += tail[j]
		}
		return
	}
	for _, j := range survivors {
		dot8Tail(s.p.codes, codes[int(j)*r.dim:(int(j)+1)*r.dim], r.dim, from, 1, tail[:1])
		dots[j] += tail[0]
	}
}

// firstStage bounds the similarity of each live row of a block from its
// integer dot product over the first split(dim) dimensions, marks those
// whose bound is below cut not live, and appends the others' positions
// to kept. The bound is the first part's, as bounds bounds it, plus at
// most the product of the two tails' lengths for the rest
// (Cauchy–Schwarz); the row's exact component counts in the first part
// only when it lies there, otherwise its tail length holds it. The loop
// runs once per stored row for every query, so the query's terms are
// taken out of it.
func (p *probe) firstStage(heads []rowHead, tails []float32, dots []int32, live []bool, from int, cut float64, kept []uint8) []uint8 {
	scale, errQ, tailQ := p.scale, unitLength+p.resid, p.tail
	fixed := p.slack + 1e-12
	q := p.q
	heads, tails, dots = heads[:len(live)], tails[:len(live)], dots[:len(live)]
	for j := range live {
		if !live[j] {
			continue
		}
		h := &heads[j]
		up := scale*float64(h.scale)*float64(dots[j]) + errQ*float64(h.resid) + tailQ*float64(tails[j]) + fixed
		if int(h.outIdx) < from {
			up += float64(q[h.outIdx]) * float64(h.outVal)
		}
		// Written so that a NaN bound keeps the row, as the second
		// stage would.
		if up < cut {
			live[j] = false
			continue
		}
		kept = append(kept, uint8(j))
	}
	return kept
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
