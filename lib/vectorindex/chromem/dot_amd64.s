#include "textflag.h"

// func dotRowsAVX2(q, rows *float32, d32, stride, n int, out *float32)
// For each of n rows: four 8-lane accumulators over the first d32 floats
// (a positive multiple of 32), then the reduction tree of reduce() in
// dot.go. Multiplies and adds are separate instructions (no FMA).
TEXT ·dotRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ rows+8(FP), DI
	MOVQ d32+16(FP), R8
	MOVQ stride+24(FP), R9
	MOVQ n+32(FP), R10
	MOVQ out+40(FP), R11

row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   SI, AX
	MOVQ   DI, BX
	MOVQ   R8, CX

inner:
	VMOVUPS 0(AX), Y4
	VMOVUPS 32(AX), Y5
	VMOVUPS 64(AX), Y6
	VMOVUPS 96(AX), Y7
	VMULPS  0(BX), Y4, Y4
	VMULPS  32(BX), Y5, Y5
	VMULPS  64(BX), Y6, Y6
	VMULPS  96(BX), Y7, Y7
	VADDPS  Y4, Y0, Y0
	VADDPS  Y5, Y1, Y1
	VADDPS  Y6, Y2, Y2
	VADDPS  Y7, Y3, Y3
	ADDQ    $128, AX
	ADDQ    $128, BX
	SUBQ    $32, CX
	JNZ     inner

	// l[j] = (acc[j]+acc[j+8]) + (acc[j+16]+acc[j+24])
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	// m[j] = l[j] + l[j+4]
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	// (m0+m2), (m1+m3)
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	// (m0+m2) + (m1+m3)
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, 0(R11)

	ADDQ $4, R11
	ADDQ R9, DI
	DECQ R10
	JNZ  row

	VZEROUPPER
	RET
