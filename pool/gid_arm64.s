#include "textflag.h"

// func curG() uintptr
//
// The address of the calling goroutine's g, which the runtime keeps in
// the g register on arm64.
TEXT ·curG(SB),NOSPLIT,$0-8
	MOVD g, R0
	MOVD R0, ret+0(FP)
	RET
