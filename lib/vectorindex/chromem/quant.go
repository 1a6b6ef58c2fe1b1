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
// The bound. A unit vector v is s·c + δ with integer codes c and a residual
// δ whose length ρ is computed when v is stored; the query q is s_q·c_q +
// δ_q likewise. Then
//
//	q·v = s_q·s·(c_q·c) + (s_q·c_q)·δ + δ_q·v
//
// and by Cauchy–Schwarz |q·v − s_q·s·(c_q·c)| ≤ (|q| + ρ_q)·ρ + ρ_q·|v|,
// since |s_q·c_q| ≤ |q| + ρ_q. The float32 kernel itself rounds: its
// result differs from the exact q·v by less than kernelSlack.

// maxCode is the largest code magnitude: symmetric, so −maxCode..maxCode.
const maxCode = 127

// quantize writes v's codes to codes (len(v) of them) and returns the
// scale and an upper bound on the length of v − scale·codes.
func quantize(v []float32, codes []int8) (scale, resid float32) {
	var maxAbs float32
	for _, x := range v {
		maxAbs = max(maxAbs, float32(math.Abs(float64(x))))
	}
	if maxAbs == 0 {
		clear(codes)
		return 0, 0
	}
	scale = maxAbs / maxCode
	inv, s := maxCode/float64(maxAbs), float64(scale)
	var sq float64
	for i, x := range v {
		// Round half away from zero by truncating x·inv ± ½; the
		// explicit conversions keep the compiler from fusing the
		// multiply and add, so codes are the same on every machine.
		y := float64(float64(x) * inv)
		c := int32(y + math.Copysign(0.5, y))
		c = max(-maxCode, min(maxCode, c))
		codes[i] = int8(c)
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
// adds dim/32 products and the lanes meet in a five-level tree, so no
// partial sum passes through more than dim/32 + 6 roundings of relative
// size 2⁻²⁴ each, on terms whose magnitudes sum to at most |q|·|v|. The
// bound doubles that.
func kernelSlack(dim int) float64 {
	return 2 * float64(dim/32+8) * math.Ldexp(1, -24) * unitLength * unitLength
}

// probe is a query prepared for the scan: its codes widened to int16 for
// the integer kernel, its scale and residual, and the constant part of
// every row's error bound.
type probe struct {
	codes []int16
	scale float64
	resid float64
	// slack is ρ_q·|v| + kernelSlack, the part of the bound that does
	// not depend on the row.
	slack float64
}

func newProbe(q []float32) probe {
	codes := make([]int8, len(q))
	scale, resid := quantize(q, codes)
	p := probe{codes: make([]int16, len(q)), scale: float64(scale), resid: float64(resid)}
	for i, c := range codes {
		p.codes[i] = int16(c)
	}
	p.slack = p.resid*unitLength + kernelSlack(len(q))
	return p
}

// bounds returns the approximate similarity of a row with scale s,
// residual r and integer dot product dot, and the bound on its error.
func (p probe) bounds(s, r float32, dot int32) (approx, err float64) {
	approx = p.scale * float64(s) * float64(dot)
	err = (unitLength+p.resid)*float64(r) + p.slack
	// float64 rounding in the two lines above, far below the slack.
	err += 1e-12
	return approx, err
}
