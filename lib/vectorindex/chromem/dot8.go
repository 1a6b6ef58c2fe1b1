package chromem

// The int8 dot products serve an index that stores each vector once, as
// int8 codes with a per-row scale (symmetric quantisation, codes in
// [-127, 127]), a quarter of the float32 mirror's memory. The query is
// quantised the same way and its codes widened to int16 once per query,
// so the kernel widens only the row's codes and multiplies int16 by int16.
//
// Integer arithmetic is exact and its additions associate, so the AVX2
// kernel and the portable code give identical sums whatever the order of
// their partial sums: unlike the float32 kernel, neither has to mirror the
// other's reduction tree for the index to be deterministic across
// machines. The per-row scales apply to the exact sums afterwards.
//
// No sum overflows int32: a product is at most 127·127 = 16,129 in
// magnitude and vectorindex.MaxDimension is 1<<16 = 65,536, so every sum,
// and every partial sum of a subset of the products (a vector lane, a
// VPMADDWD pair), is within ±65,536·16,129 = ±1,057,030,144, under
// 2^31-1 = 2,147,483,647 with room to spare (the bound holds up to dim
// 133,144). VPMADDWD's one wrapping case, both pairs -32768·-32768, needs
// int16 values that no widened int8 code reaches.

// dot8Rows writes the integer dot product of q with each of n rows to out.
// q holds dim codes widened to int16; rows holds n rows of dim int8 codes,
// one after another. Codes are in [-127, 127], so no sum overflows int32
// for any dim up to vectorindex.MaxDimension (1<<16: the sums stay within
// ±1,057,030,144). The vector and portable implementations give identical
// results.
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
