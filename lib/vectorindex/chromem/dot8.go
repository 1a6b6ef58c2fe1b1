package chromem

// The int8 dot products serve an index that stores each vector once, as
// int8 codes with a per-row scale (symmetric quantisation, codes in
// [-127, 127]), a quarter of a float32 copy's memory. The query is
// quantised finer, to int16 codes in ±queryTop(dim) (quant.go), once per
// query, so the kernel widens only the row's codes and multiplies int16
// by int16.
//
// Integer arithmetic is exact and its additions associate, so the AVX2
// kernel and the portable code give identical sums whatever the order of
// their partial sums: unlike the float32 kernel, neither has to mirror the
// other's reduction tree for the index to be deterministic across
// machines. The per-row scales apply to the exact sums afterwards.
//
// No sum overflows int32: a product is at most 127·queryTop(dim) in
// magnitude, and queryTop caps the query's codes so that dim such
// products stay within 2^31-1; every partial sum (a vector lane, a
// VPMADDWD pair) is a sum of fewer. VPMADDWD's one wrapping case, both
// pairs -32768·-32768, needs int16 values that neither side reaches.

// dot8Rows writes the integer dot product of q with each of n rows to out.
// q holds dim codes in ±queryTop(dim), widened to int16; rows holds n rows
// of dim int8 codes in [-127, 127], one after another. The vector and
// portable implementations give identical results.
func dot8Rows(q []int16, rows []int8, dim, n int, out []int32) {
	q, rows, out = q[:dim], rows[:n*dim], out[:n]
	d16 := dim &^ 15
	if d16 > 0 && n > 0 {
		dot8RowsPrefix(q, rows, d16, dim, n, out)
	} else {
		clear(out)
	}
	if d16 == dim {
		return
	}
	tail := q[d16:]
	for r := range n {
		row := rows[r*dim+d16 : (r+1)*dim]
		row = row[:len(tail)]
		sum := out[r]
		for i, c := range tail {
			sum += int32(c) * int32(row[i])
		}
		out[r] = sum
	}
}

// dot8Tail writes the integer dot product of q[from:] with each of n rows'
// codes from from on; rows holds n rows of dim codes. from is a multiple
// of 16. With the product of q[:from] (dot8RowsPrefix) it is dot8Rows'
// exact sum.
func dot8Tail(q []int16, rows []int8, dim, from, n int, out []int32) {
	out = out[:n]
	w := dim - from
	w16 := w &^ 15
	if w16 > 0 {
		dot8RowsPrefix(q[from:], rows[from:], w16, dim, n, out)
	} else {
		clear(out)
	}
	if w16 == w {
		return
	}
	tail := q[from+w16 : dim]
	for r := range n {
		row := rows[r*dim+from+w16 : (r+1)*dim]
		row = row[:len(tail)]
		sum := out[r]
		for i, c := range tail {
			sum += int32(c) * int32(row[i])
		}
		out[r] = sum
	}
}

// dot8RowsGo is the portable dot8RowsPrefix: the dot product of the first
// d16 codes of q with those of each row.
func dot8RowsGo(q []int16, rows []int8, d16, dim, n int, out []int32) {
	x := q[:d16]
	for r := range n {
		y := rows[r*dim : r*dim+d16]
		y = y[:len(x)]
		var sum int32
		for i, c := range x {
			sum += int32(c) * int32(y[i])
		}
		out[r] = sum
	}
}
