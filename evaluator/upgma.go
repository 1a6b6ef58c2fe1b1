package evaluator

import (
	"math"
	"runtime"
	"slices"
	"sync"
)

// upgma clusters unit vectors by average linkage (UPGMA) and returns a
// cluster number per vector: two clusters merge while the mean similarity
// between their members is at least threshold, the most similar pair
// first. The result does not depend on the order of the vectors beyond
// exact ties, which go to the pair with the smaller indexes — so callers
// pass vectors in a canonical order (docs/lessons.md, "Re-clustering").
//
// weights lets a unit stand for several vectors that stay together (a
// cluster kept whole, decisions a curator linked): its vector is then the
// sum of theirs, and similarities are still exact means over the vectors
// behind the units. nil means one unit vector each. apart lists pairs of
// units that must never share a cluster (a curator kept them apart).
//
// It runs the nearest-neighbour chain over a similarity matrix updated by
// the Lance–Williams formula, O(n²) time and memory for n vectors.
func upgma(vecs [][]float32, weights []int, apart [][2]int, threshold float64) []int {
	n := len(vecs)
	assign := make([]int, n)
	if n == 0 {
		return assign
	}
	size := make([]float64, n)
	for i := range size {
		size[i] = 1
		if weights != nil {
			size[i] = float64(max(weights[i], 1))
		}
	}
	// sim is the lower triangle, row i holding sim(i, j) for j < i. The
	// n²/2 dot products are most of a pass's time: the vectors are
	// widened to float64 once, not once per pair.
	wide := widen(vecs)
	sim := make([][]float32, n)
	fillSimilarities(sim, wide, size)
	// -Inf survives every Lance–Williams update: a cluster holding one
	// side of a pair is never merged with one holding the other.
	for _, p := range apart {
		if p[0] != p[1] && p[0] >= 0 && p[1] >= 0 && p[0] < n && p[1] < n {
			i, j := max(p[0], p[1]), min(p[0], p[1])
			sim[i][j] = float32(math.Inf(-1))
		}
	}
	at := func(i, j int) float32 {
		if i < j {
			i, j = j, i
		}
		return sim[i][j]
	}
	set := func(i, j int, v float32) {
		if i < j {
			i, j = j, i
		}
		sim[i][j] = v
	}
	active := make([]bool, n)
	for i := range active {
		active[i] = true
	}
	parent := make([]int, n) // union-find over merged units
	for i := range parent {
		parent[i] = i
	}
	// done marks units that can merge with nothing at the threshold.
	done := make([]bool, n)
	var chain []int
	t := float32(threshold)
	for {
		if len(chain) == 0 {
			start := -1
			for i := range n {
				if active[i] && !done[i] {
					start = i
					break
				}
			}
			if start < 0 {
				break
			}
			chain = append(chain, start)
		}
		top := chain[len(chain)-1]
		best, bestSim := -1, float32(math.Inf(-1))
		for j := range n {
			if j == top || !active[j] || done[j] {
				continue
			}
			if s := at(top, j); s > bestSim || (s == bestSim && j < best) {
				best, bestSim = j, s
			}
		}
		// The previous chain element wins ties, so the chain ends in a
		// reciprocal pair.
		if len(chain) > 1 {
			prev := chain[len(chain)-2]
			if s := at(top, prev); s >= bestSim {
				best, bestSim = prev, s
			}
		}
		if best < 0 || bestSim < t {
			// Nothing merges with top at the threshold, and merges never
			// raise similarities (average linkage is reducible): it is final.
			done[top] = true
			chain = chain[:0]
			continue
		}
		if len(chain) > 1 && best == chain[len(chain)-2] {
			// A reciprocal pair: merge top into best.
			chain = chain[:len(chain)-2]
			a, b := best, top
			for k := range n {
				if k == a || k == b || !active[k] {
					continue
				}
				set(a, k, float32((size[a]*float64(at(a, k))+size[b]*float64(at(b, k)))/(size[a]+size[b])))
			}
			size[a] += size[b]
			active[b] = false
			parent[b] = a
			continue
		}
		chain = append(chain, best)
	}
	// Number the clusters by their smallest member.
	root := func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	number := map[int]int{}
	for i := range n {
		r := root(i)
		if _, ok := number[r]; !ok {
			number[r] = len(number)
		}
		assign[i] = number[r]
	}
	return assign
}

// parallelFrom is the number of units from which the similarity matrix
// is filled on every core: below it starting goroutines costs more than
// it saves.
const parallelFrom = 512

// fillSimilarities fills the lower triangle sim with the mean
// similarities of the units, split across cores by rows holding about
// as many entries each. Every entry is computed alone, so the matrix is
// the same whatever the split. At a million stored decisions the
// matrices of the largest groups were most of a full re-clustering
// round.
func fillSimilarities(sim [][]float32, wide [][]float64, size []float64) {
	n := len(sim)
	rows := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			sim[i] = make([]float32, i)
			for j := range i {
				sim[i][j] = float32(dot64(wide[i], wide[j]) / (size[i] * size[j]))
			}
		}
	}
	workers := runtime.GOMAXPROCS(0)
	if n < parallelFrom || workers == 1 {
		rows(0, n)
		return
	}
	// Rows 0..b hold about b²/2 entries: worker k ends at n·√((k+1)/w).
	var wg sync.WaitGroup
	lo := 0
	for k := range workers {
		hi := n
		if k < workers-1 {
			hi = min(n, int(float64(n)*math.Sqrt(float64(k+1)/float64(workers))))
		}
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			rows(lo, hi)
		}(lo, hi)
		lo = hi
	}
	wg.Wait()
}

// widen copies vecs to float64, in one allocation.
func widen(vecs [][]float32) [][]float64 {
	total := 0
	for _, v := range vecs {
		total += len(v)
	}
	flat := make([]float64, 0, total)
	out := make([][]float64, len(vecs))
	for i, v := range vecs {
		start := len(flat)
		for _, x := range v {
			flat = append(flat, float64(x))
		}
		out[i] = flat[start:len(flat):len(flat)]
	}
	return out
}

// dot64 is the dot product of a and b over their common length, summed
// in one order on every machine: sixteen running sums over the largest
// multiple of 16 values, reduced in a fixed tree (dot64Head, or its
// AVX2 twin, equal to the bit), then the rest in order. Re-clustering
// fills its matrices with it (fillSimilarities), and every replica must
// find the same clusters.
func dot64(a, b []float64) float64 {
	n := min(len(a), len(b))
	n16 := n &^ 15
	s := dot64Prefix(a, b, n16)
	for i := n16; i < n; i++ {
		s += float64(a[i] * b[i])
	}
	return s
}

// dot64Head sums a multiple of 16 products: acc[k] adds the products of
// the indexes k modulo 16 in order, then
// l[j] = (acc[j]+acc[j+4]) + (acc[j+8]+acc[j+12]) and the sum is
// (l[0]+l[2]) + (l[1]+l[3]). float64() keeps a compiler from fusing a
// product into its sum.
func dot64Head(a, b []float64) float64 {
	var acc [16]float64
	b = b[:len(a)]
	for i := 0; i+16 <= len(a); i += 16 {
		for k := range 16 {
			acc[k] += float64(a[i+k] * b[i+k])
		}
	}
	var l [4]float64
	for j := range 4 {
		l[j] = (acc[j] + acc[j+4]) + (acc[j+8] + acc[j+12])
	}
	return (l[0] + l[2]) + (l[1] + l[3])
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range min(len(a), len(b)) {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// partition turns a cluster number per item into the items of each
// cluster, clusters ordered by their first item.
func partition(assign []int) [][]int {
	var out [][]int
	index := map[int]int{}
	for i, c := range assign {
		k, ok := index[c]
		if !ok {
			k = len(out)
			index[c] = k
			out = append(out, nil)
		}
		out[k] = append(out[k], i)
	}
	for _, p := range out {
		slices.Sort(p)
	}
	return out
}
