package chromem

// The dot products of the flat mirror keep 32 partial sums (eight float32
// lanes in each of four 256-bit registers) and reduce them in a fixed
// tree. The portable code keeps the same sums in the same order, so every
// machine computes bit-identical similarities whichever implementation
// runs: replicas must cluster the same feedback the same way. Multiplies
// and adds stay separate (no FMA), and the explicit float32 conversions
// keep the Go compiler from fusing them.

// dotRows writes the dot product of q with each of n rows (stored one
// after the other, len(q) floats each) to out.
func dotRows(q, rows []float32, n int, out []float32) {
	dim := len(q)
	d32 := dim &^ 31
	if d32 > 0 && n > 0 {
		dotRowsPrefix(q, rows, d32, dim, n, out)
	} else {
		clear(out[:n])
	}
	if d32 == dim {
		return
	}
	for r := range n {
		row := rows[r*dim : (r+1)*dim]
		sum := out[r]
		for i := d32; i < dim; i++ {
			sum = float32(sum + float32(q[i]*row[i]))
		}
		out[r] = sum
	}
}

// dotRowsGo is the portable dotRowsPrefix.
func dotRowsGo(q, rows []float32, d32, dim, n int, out []float32) {
	for r := range n {
		row := rows[r*dim : r*dim+d32]
		var acc [32]float32
		for i := 0; i < d32; i += 32 {
			x, y := q[i:i+32:i+32], row[i:i+32:i+32]
			for j := range 32 {
				acc[j] = float32(acc[j] + float32(x[j]*y[j]))
			}
		}
		out[r] = reduce(&acc)
	}
}

// reduce sums the 32 partial sums in the vector code's order: registers
// pairwise, then halves of the result.
func reduce(acc *[32]float32) float32 {
	var l [8]float32
	for j := range 8 {
		l[j] = float32(float32(acc[j]+acc[j+8]) + float32(acc[j+16]+acc[j+24]))
	}
	m0, m1 := float32(l[0]+l[4]), float32(l[1]+l[5])
	m2, m3 := float32(l[2]+l[6]), float32(l[3]+l[7])
	return float32(float32(m0+m2) + float32(m1+m3))
}
