package analytics

import (
	"math"
	"slices"
)

// Review durations are counted in a fixed log-scale histogram, so the
// histograms of any cells add up to the histogram of their union and a
// percentile over many days and agents costs one pass over the bins
// (docs/analytics.md, "Review durations").
//
// Bin 0 holds 0 s; bin b ≥ 1 holds the whole seconds d with
// binsPerDoubling·log2(d) in [b-1, b); the last bin holds everything from
// 2^maxDoublings seconds on. A bin's reported value is the geometric mean
// of the first and last whole second it holds, so a reported percentile
// is within 2^(1/(2·binsPerDoubling)) - 1 (4.4%) of the exact one, and
// exact while a bin holds a single second (up to 11 s).
const (
	binsPerDoubling = 8
	maxDoublings    = 24 // 2^24 s is 194 days
	numBins         = 2 + binsPerDoubling*maxDoublings
)

// DurationErrorBound is the largest relative error of a reported review
// duration percentile below the top bin.
var DurationErrorBound = math.Exp2(1.0/(2*binsPerDoubling)) - 1

// durationBin returns the bin of a duration in whole seconds.
func durationBin(seconds int64) int {
	if seconds <= 0 {
		return 0
	}
	b := 1 + int(math.Floor(binsPerDoubling*math.Log2(float64(seconds))))
	return min(b, numBins-1)
}

// binValue is what a bin reports, in seconds.
func binValue(b int) float64 { return binValues[b] }

// binValues holds what each bin reports, computed once: every percentile
// of every bucket of a query reads one.
var binValues = func() (v [numBins]float64) {
	for b := range v {
		v[b] = computeBinValue(b)
	}
	return v
}()

func computeBinValue(b int) float64 {
	if b == 0 {
		return 0
	}
	if b == numBins-1 {
		return math.Exp2(maxDoublings)
	}
	lo := math.Ceil(math.Exp2(float64(b-1) / binsPerDoubling))
	hi := math.Ceil(math.Exp2(float64(b)/binsPerDoubling)) - 1
	if hi <= lo {
		return lo
	}
	return math.Sqrt(lo * hi)
}

// Bin is one non-empty bin of a cell's histogram.
type Bin struct {
	B uint16
	N int64
}

// Histogram is a sparse histogram of review durations, bins in order.
type Histogram []Bin

func (h Histogram) add(b int, n int64) Histogram {
	i, found := slices.BinarySearchFunc(h, uint16(b), func(x Bin, t uint16) int { return int(x.B) - int(t) })
	if found {
		h[i].N += n
		if h[i].N <= 0 {
			h = slices.Delete(h, i, i+1)
		}
		return h
	}
	if n <= 0 {
		return h
	}
	return slices.Insert(h, i, Bin{B: uint16(b), N: n})
}

// dense is a histogram summed over cells.
type dense [numBins]int64

func (d *dense) merge(h Histogram) {
	for _, b := range h {
		d[b.B] += b.N
	}
}

// count adds up the bins below hi (all bins in use).
func (d *dense) count(hi int) int64 {
	var n int64
	for _, c := range d[:hi] {
		n += c
	}
	return n
}

// medianAndP90 returns the nearest-rank median and 90th percentile of
// the n durations counted below bin hi, in one pass: a query asks for
// both in each of its buckets.
func (d *dense) medianAndP90(n int64, hi int) (p50, p90 float64) {
	if n == 0 {
		return 0, 0
	}
	r50 := max(int64(math.Ceil(0.5*float64(n))), 1)
	r90 := max(int64(math.Ceil(0.9*float64(n))), 1)
	var seen int64
	found50 := false
	for b, c := range d[:hi] {
		seen += c
		if !found50 && seen >= r50 {
			p50, found50 = binValue(b), true
		}
		if seen >= r90 {
			return p50, binValue(b)
		}
	}
	top := binValue(numBins - 1)
	if !found50 {
		p50 = top
	}
	return p50, top
}
