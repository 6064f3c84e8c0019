#include "textflag.h"

// func curG() uintptr
//
// The address of the calling goroutine's g, which the runtime keeps in
// thread-local storage on amd64.
TEXT ·curG(SB),NOSPLIT,$0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
