package effect

import "math"

// z95 is the standard normal quantile of a two-sided 95% interval.
const z95 = 1.959963984540054

// Method names how intervals are computed, for reports.
const Method = "wilson score 95% per rate; newcombe hybrid score 95% for the change"

// Interval is a two-sided confidence interval.
type Interval struct{ Low, High float64 }

// wilson returns the Wilson score interval of k successes in n trials.
// With no trials it is [0, 1]: nothing is known.
func wilson(k, n int64) Interval {
	if n <= 0 {
		return Interval{0, 1}
	}
	nf := float64(n)
	p := float64(k) / nf
	z2 := z95 * z95
	den := 1 + z2/nf
	centre := (p + z2/(2*nf)) / den
	half := z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / den
	return Interval{Low: math.Max(0, centre-half), High: math.Min(1, centre+half)}
}

// newcombe returns the hybrid score interval (Newcombe 1998, method 10)
// of p1 - p2 for k1 of n1 against k2 of n2, built from the two Wilson
// intervals. With no trials on either side it is [-1, 1].
func newcombe(k1, n1, k2, n2 int64) Interval {
	if n1 <= 0 || n2 <= 0 {
		return Interval{-1, 1}
	}
	p1, p2 := float64(k1)/float64(n1), float64(k2)/float64(n2)
	w1, w2 := wilson(k1, n1), wilson(k2, n2)
	d := p1 - p2
	low := d - math.Sqrt((p1-w1.Low)*(p1-w1.Low)+(w2.High-p2)*(w2.High-p2))
	high := d + math.Sqrt((w1.High-p1)*(w1.High-p1)+(p2-w2.Low)*(p2-w2.Low))
	return Interval{Low: math.Max(-1, low), High: math.Min(1, high)}
}

func rate(k, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return float64(k) / float64(n)
}
