//go:build linux && (!amd64 || !gc || purego)

package pin

// fastCPU has no register to read here: CurrentCPU asks the kernel.
func fastCPU() (cpu, node int, ok bool) { return 0, 0, false }

// auxTrusted: no register here.
func auxTrusted() bool { return false }
