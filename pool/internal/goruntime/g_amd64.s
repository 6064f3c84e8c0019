#include "textflag.h"

// func curG() uintptr
//
// The address of the calling goroutine's g. The runtime keeps it in a
// thread-local slot on amd64; the (TLS) operand loads that slot, as the
// runtime's get_tls and g macros (runtime/go_tls.h) do. R14 holds g only
// in ABIInternal code, and this function is ABI0. Checked against Go
// 1.26 (see g_asm.go).
TEXT ·curG(SB),NOSPLIT,$0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
