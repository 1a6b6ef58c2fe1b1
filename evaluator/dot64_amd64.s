#include "textflag.h"

// func dot64AVX2(a, b *float64, n16 int) float64
// Four 4-lane accumulators over the first n16 float64s (a positive
// multiple of 16), then the reduction tree of dot64Head in upgma.go.
// Multiplies and adds are separate instructions (no FMA), so the sum is
// dot64Head's to the bit.
TEXT ·dot64AVX2(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n16+16(FP), CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3

loop:
	VMOVUPD 0(SI), Y4
	VMOVUPD 32(SI), Y5
	VMOVUPD 64(SI), Y6
	VMOVUPD 96(SI), Y7
	VMULPD  0(DI), Y4, Y4
	VMULPD  32(DI), Y5, Y5
	VMULPD  64(DI), Y6, Y6
	VMULPD  96(DI), Y7, Y7
	VADDPD  Y4, Y0, Y0
	VADDPD  Y5, Y1, Y1
	VADDPD  Y6, Y2, Y2
	VADDPD  Y7, Y3, Y3
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $16, CX
	JNZ     loop

	// l[j] = (acc[j]+acc[j+4]) + (acc[j+8]+acc[j+12])
	VADDPD       Y1, Y0, Y0
	VADDPD       Y3, Y2, Y2
	VADDPD       Y2, Y0, Y0
	// (l0+l2), (l1+l3)
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X0
	// (l0+l2) + (l1+l3)
	VMOVHLPS     X0, X0, X1
	VADDSD       X1, X0, X0
	VZEROUPPER
	MOVSD        X0, ret+24(FP)
	RET
