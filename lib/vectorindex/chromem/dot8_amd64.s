#include "textflag.h"

// func dot8RowsAVX2(q *int16, rows *int8, d16, stride, n int, out *int32)
// For each of n rows, over the first d16 codes (a positive multiple of
// 16): VPMOVSXBW widens 16 of the row's int8 codes to int16, VPMADDWD
// multiplies them by 16 of the query's int16 codes and adds adjacent
// products into 8 int32 lanes, VPADDD accumulates the lanes. The main loop
// takes 64 codes at a time into four accumulators, so consecutive adds do
// not wait on one another; a second loop takes the remaining 16, 32 or 48
// into the first. The lanes are then summed horizontally. The sums are
// exact, so the order of the additions does not matter (see dot8.go).
TEXT ·dot8RowsAVX2(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ rows+8(FP), DI
	MOVQ d16+16(FP), R8
	MOVQ stride+24(FP), R9
	MOVQ n+32(FP), R10
	MOVQ out+40(FP), R11

row:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	MOVQ  SI, AX
	MOVQ  DI, BX
	MOVQ  R8, CX
	CMPQ  CX, $64
	JB    rest

inner64:
	VPMOVSXBW 0(BX), Y4
	VPMOVSXBW 16(BX), Y5
	VPMOVSXBW 32(BX), Y6
	VPMOVSXBW 48(BX), Y7
	VPMADDWD  0(AX), Y4, Y4
	VPMADDWD  32(AX), Y5, Y5
	VPMADDWD  64(AX), Y6, Y6
	VPMADDWD  96(AX), Y7, Y7
	VPADDD    Y4, Y0, Y0
	VPADDD    Y5, Y1, Y1
	VPADDD    Y6, Y2, Y2
	VPADDD    Y7, Y3, Y3
	ADDQ      $128, AX
	ADDQ      $64, BX
	SUBQ      $64, CX
	CMPQ      CX, $64
	JAE       inner64

rest:
	TESTQ CX, CX
	JZ    reduce

inner16:
	VPMOVSXBW 0(BX), Y4
	VPMADDWD  0(AX), Y4, Y4
	VPADDD    Y4, Y0, Y0
	ADDQ      $32, AX
	ADDQ      $16, BX
	SUBQ      $16, CX
	JNZ       inner16

reduce:
	// four accumulators into one
	VPADDD       Y1, Y0, Y0
	VPADDD       Y3, Y2, Y2
	VPADDD       Y2, Y0, Y0
	// eight lanes into four
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	// four into two: add the swapped 64-bit halves
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	// two into one: add the swapped 32-bit neighbours
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        X0, 0(R11)

	ADDQ $4, R11
	ADDQ R9, DI
	DECQ R10
	JNZ  row

	VZEROUPPER
	RET
