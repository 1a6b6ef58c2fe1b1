package chromem

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"sort"
)

// rows is everything the index holds in memory, one entry per stored
// vector, in parallel slices so that a scan reads contiguous memory: the
// vector's int8 codes with their head (scale, residual and largest
// component, quant.go), the numbers of its metadata pairs (meta.go) and
// where its record lies in the journal. The float32 vector and the document are read back from the
// journal when a query needs them. At 384 dimensions a row takes about
// 570 bytes of heap, ID, metadata and map entry included, against 3,800
// when chromem-go's document and a float32 mirror each held the vector
// (BenchmarkHeapPerVector).
type rows struct {
	dim int
	ids []string
	pos map[string]int32
	// codes holds the rows' codes in chunks of chunkRows rows, so that
	// growing by a row never copies, or holds twice, all the codes.
	codes [][]int8
	head  []rowHead
	// sum is a hash of the row's float32 vector: rows with equal sums
	// and heads hold the same vector, which the exact re-score then
	// reads and scores once (identical comments embed identically).
	sum  []uint64
	meta [][]uint32 // the numbers of the row's metadata pairs, sorted
	// tail bounds the length of the row's vector past split(dim), for the
	// scan's first stage (scan.go).
	tail  []float32
	at    []int64  // offset of the row's record in the journal
	size  []uint32 // length of that record, header included
	pairs *pairs
	// post lists the rows holding each pair (postings.go).
	post postings
}

func newRows(dim int) *rows {
	return &rows{dim: dim, pos: map[string]int32{}, pairs: newPairs()}
}

func (r *rows) len() int { return len(r.ids) }

// chunkRows is how many rows' codes one chunk holds: a multiple of the
// scan's block, 1.5 MiB at 384 dimensions.
const chunkRows = 4096

// code returns row i's codes.
func (r *rows) code(i int) []int8 {
	c, k := i/chunkRows, i%chunkRows
	return r.codes[c][k*r.dim : (k+1)*r.dim]
}

// upsert stores v, normalised as the float32 kernel sees it, with its
// metadata and the location of its journal record.
func (r *rows) upsert(id string, v []float32, meta map[string]string, at int64, size uint32) {
	held := r.pairs.acquire(meta)
	i, ok := r.pos[id]
	if ok {
		r.post.relist(i, r.meta[i], held)
		r.pairs.release(r.meta[i])
	} else {
		i = int32(len(r.ids))
		r.pos[id] = i
		r.ids = append(r.ids, id)
		if int(i)%chunkRows == 0 {
			r.codes = append(r.codes, make([]int8, chunkRows*r.dim))
		}
		r.head, r.sum, r.tail = append(r.head, rowHead{}), append(r.sum, 0), append(r.tail, 0)
		r.meta, r.at, r.size = append(r.meta, nil), append(r.at, 0), append(r.size, 0)
		r.post.relist(i, nil, held)
	}
	n := normalized(v)
	r.head[i], r.sum[i], r.tail[i] = quantize(n, r.code(int(i))), vectorSum(n), tailNorm(n, split(r.dim))
	r.meta[i], r.at[i], r.size[i] = held, at, size
}

// delete removes id, moving the last row into its place.
func (r *rows) delete(id string) {
	i, ok := r.pos[id]
	if !ok {
		return
	}
	last := int32(len(r.ids) - 1)
	r.post.relist(i, r.meta[i], nil)
	r.pairs.release(r.meta[i])
	if i != last {
		// The last row takes i's place: its lists name i instead.
		r.post.relist(last, r.meta[last], nil)
		r.post.relist(i, nil, r.meta[last])
		r.ids[i] = r.ids[last]
		r.pos[r.ids[i]] = i
		copy(r.code(int(i)), r.code(int(last)))
		r.head[i], r.sum[i], r.meta[i], r.tail[i] = r.head[last], r.sum[last], r.meta[last], r.tail[last]
		r.at[i], r.size[i] = r.at[last], r.size[last]
	}
	r.ids[last], r.meta[last] = "", nil
	r.ids = r.ids[:last]
	if int(last)%chunkRows == 0 {
		r.codes[len(r.codes)-1] = nil
		r.codes = r.codes[:len(r.codes)-1]
	}
	r.head, r.sum, r.meta, r.tail = r.head[:last], r.sum[:last], r.meta[:last], r.tail[:last]
	r.at, r.size = r.at[:last], r.size[:last]
	delete(r.pos, id)
}

// sumSeed keys vectorSum; sums live only in memory, so a seed per process
// does.
var sumSeed = maphash.MakeSeed()

// vectorSum hashes v's float32 bits.
func vectorSum(v []float32) uint64 {
	var stack [4 * 512]byte
	b := stack[:0]
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return maphash.Bytes(sumSeed, b)
}

// scored is a hit with its exact float32 similarity.
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

// best returns the n best of hits with similarity ≥ minSim, best first,
// ties by id ascending: exactly the contract's order.
func best(hits []scored, n int, minSim float32) []scored {
	kept := hits[:0:0]
	for _, h := range hits {
		if h.sim >= minSim {
			kept = append(kept, h)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return worse(kept[j], kept[i]) })
	return kept[:min(n, len(kept))]
}

// normalized returns v scaled to unit length (a copy when it has to
// scale), as the float32 kernel compares vectors.
func normalized(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if math.Abs(sum-1) < 1e-6 || sum == 0 {
		return v
	}
	out := make([]float32, len(v))
	n := float32(1 / math.Sqrt(sum))
	if math.IsInf(float64(n), 0) {
		// A vector so short its inverse length overflows float32.
		for i, x := range v {
			out[i] = float32(float64(x) / math.Sqrt(sum))
		}
		return out
	}
	for i, x := range v {
		out[i] = x * n
	}
	return out
}
