//go:build !linux

// Command vminit is PID 1 of the Linux VM of scripts/numa-vm.sh; it does
// nothing elsewhere.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "vminit runs as PID 1 of a Linux VM only")
	os.Exit(1)
}
