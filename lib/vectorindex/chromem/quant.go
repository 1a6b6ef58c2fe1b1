package chromem

import "math"

// Each vector is held in memory once, as int8 codes with a per-row scale
// (a quarter of float32's size); the float32 vector stays in the journal
// on disk. A query scans the codes, which gives every row an approximate
// similarity and a proven bound on its error, and then re-scores, from the
// journal and with the float32 kernel, every row the bound cannot rule
// out. The answer is therefore the one the float32 scan would give, bit
// for bit, on every machine (docs/decisions/0003-flat-mirror-avx2.md).
//
// The bound. A unit vector v is o·e_k + s·c + δ: its largest component o
// kept exactly, integer codes c (0 at k) and a residual δ whose length ρ
// is computed when v is stored; the query q is s_q·c_q + δ_q likewise,
// without an exact component. Then
//
//	q·v = q_k·o + s_q·s·(c_q·c) + s·(δ_q·c) + q·δ
//
// and by Cauchy–Schwarz the last two terms are at most ρ_q·(|v| + ρ) and
// |q|·ρ in magnitude, since |s·c| ≤ |v − δ|. The float32 kernel itself rounds: its
// result differs from the exact q·v by less than kernelSlack.

// maxCode is the largest code magnitude: symmetric, so −maxCode..maxCode.
const maxCode = 127

// rowHead is what a row keeps besides its codes: the codes' scale, the
// bound ρ on the length of what they lose, and the row's largest
// component, kept exactly. Embedders put a large constant in one
// dimension (precept's local embedder does: lib/embedding, calibrationDim),
// and a per-row scale set by it would leave the other components a few
// steps of resolution; without it ρ is about a third as large.
type rowHead struct {
	scale, resid float32
	outVal       float32
	outIdx       uint16
}

// quantize writes v's codes to codes (len(v) of them, at most
// vectorindex.MaxDimension) and returns its head: the largest component
// exactly (its code is 0), the others as codes.
func quantize(v []float32, codes []int8) rowHead {
	k := 0
	for i, x := range v {
		if math.Abs(float64(x)) > math.Abs(float64(v[k])) {
			k = i
		}
	}
	scale, resid := quantizeTo(v, maxCode, k, codes)
	return rowHead{scale: scale, resid: resid, outVal: v[k], outIdx: uint16(k)}
}

// quantizeTo quantises v, but for component skip (none when negative),
// symmetrically to integer codes in −top..top (0 for skip), and returns
// the scale and an upper bound on the length of what the codes lose.
func quantizeTo[C int8 | int16](v []float32, top int32, skip int, codes []C) (scale, resid float32) {
	codes = codes[:len(v)]
	var maxAbs float64
	for i, x := range v {
		if a := math.Abs(float64(x)); a > maxAbs && i != skip {
			maxAbs = a
		}
	}
	if maxAbs == 0 {
		clear(codes)
		return 0, 0
	}
	scale = float32(maxAbs) / float32(top)
	inv, s := float64(top)/maxAbs, float64(scale)
	var sq float64
	for i, x := range v {
		if i == skip {
			codes[i] = 0
			continue
		}
		// Round half away from zero by truncating x·inv ± ½; the
		// explicit conversions keep the compiler from fusing the
		// multiply and add, so codes are the same on every machine.
		y := float64(float64(x) * inv)
		c := int32(y + math.Copysign(0.5, y))
		c = max(-top, min(top, c))
		codes[i] = C(c)
		d := float64(x) - float64(s*float64(c))
		sq += d * d
	}
	return scale, roundUp(math.Sqrt(sq))
}

// roundUp returns a float32 no smaller than r, with a relative margin for
// the float64 rounding in computing r.
func roundUp(r float64) float32 {
	r = r*(1+1e-9) + 1e-12
	f := float32(r)
	if float64(f) < r {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// unitLength bounds the length of a vector normalized() returns: float32
// rounding leaves it within a few parts in a million of 1.
const unitLength = 1 + 1e-5

// kernelSlack bounds how far the float32 kernel's dot product of two unit
// vectors of dimension dim lies from the exact one. Each of its 32 lanes
// adds dim/32 products, the lanes meet in a five-level tree, and the
// dim%32 products past the last full 32 are added one by one after it, so
// no product passes through more than dim/32 + dim%32 + 7 roundings of
// relative size 2⁻²⁴ each (its own included), on terms whose magnitudes
// sum to at most |q|·|v|. The bound doubles that.
func kernelSlack(dim int) float64 {
	return 2 * float64((dim+31)/32+dim%32+7) * math.Ldexp(1, -24) * unitLength * unitLength
}

// probe is a query prepared for the scan: its codes widened to int16 for
// the integer kernel, its scale and residual, and the constant part of
// every row's error bound.
type probe struct {
	q     []float32 // the query, unit length
	codes []int16
	scale float64
	resid float64
	// tail bounds the query's length past split(dim); the scan's first
	// stage runs when it is at most maxStagedTail.
	tail float64
	// slack is ρ_q·|v| + kernelSlack, the part of the bound that does
	// not depend on the row.
	slack float64
}

// queryTop is the largest code magnitude of a query of dimension dim:
// as fine as int16 allows, and coarse enough that no sum of dim products
// with row codes (at most maxCode each) overflows the kernel's int32.
// At 384 dimensions the query's residual is about 250 times smaller than
// a row's, so the bound is almost all the row's.
func queryTop(dim int) int32 {
	return int32(min(math.MaxInt16, math.MaxInt32/(maxCode*dim)))
}

func newProbe(q []float32) probe {
	p := probe{q: q, codes: make([]int16, len(q))}
	scale, resid := quantizeTo(q, queryTop(len(q)), -1, p.codes)
	p.scale, p.resid = float64(scale), float64(resid)
	p.slack = p.resid*unitLength + kernelSlack(len(q))
	p.tail = float64(tailNorm(q, split(len(q))))
	return p
}

// split is where the scan's first stage stops: half the dimensions,
// rounded down to the kernel's 16 (0, no first stage, below 32).
func split(dim int) int {
	if dim < 32 {
		return 0
	}
	return (dim / 2) &^ 15
}

// tailNorm is an upper bound on the length of v[from:] (0 when from is
// 0: no first stage).
func tailNorm(v []float32, from int) float32 {
	if from <= 0 {
		return 0
	}
	var sq float64
	for _, x := range v[from:] {
		sq += float64(x) * float64(x)
	}
	return roundUp(math.Sqrt(sq))
}

// bounds returns the approximate similarity of a row with head h and
// integer dot product dot, and the bound on its error.
func (p probe) bounds(h rowHead, dot int32) (approx, err float64) {
	approx = p.scale*float64(h.scale)*float64(dot) + float64(p.q[h.outIdx])*float64(h.outVal)
	err = (unitLength+p.resid)*float64(h.resid) + p.slack
	// float64 rounding in the two lines above, far below the slack.
	err += 1e-12
	return approx, err
}
