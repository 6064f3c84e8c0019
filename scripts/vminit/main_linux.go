// Command vminit is PID 1 of the multi-node VM that scripts/numa-vm.sh
// boots: it mounts /proc, /sys and /dev, runs /payload with the
// arguments listed one per line in /payload.args, prints
// "NUMAPOOL-VM-EXIT <code>" on the console and powers the VM off.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	code := run()
	fmt.Printf("\nNUMAPOOL-VM-EXIT %d\n", code)
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	os.Exit(code) // not reached when the reboot call works
}

// settle waits (at most 10 s) until the nodes' free memory stops growing:
// the kernel initialises much of each node's memory in the background
// after boot (deferred struct page init), and until it is done an
// allocation can fall back to another node, which would spoil placement
// tests.
func settle() {
	prev := int64(-1)
	for range 100 {
		var free int64
		files, _ := filepath.Glob("/sys/devices/system/node/node*/meminfo")
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if i := strings.Index(line, "MemFree:"); i >= 0 {
					var kb int64
					fmt.Sscanf(strings.TrimSpace(line[i+len("MemFree:"):]), "%d", &kb)
					free += kb
				}
			}
		}
		if free == prev {
			return
		}
		prev = free
		time.Sleep(100 * time.Millisecond)
	}
}

func run() int {
	for _, m := range []struct{ src, dir, fstype string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"}, {"tmpfs", "/tmp", "tmpfs"},
	} {
		_ = os.MkdirAll(m.dir, 0o755)
		if err := unix.Mount(m.src, m.dir, m.fstype, 0, ""); err != nil {
			fmt.Fprintf(os.Stderr, "vminit: mount %s: %v\n", m.dir, err)
		}
	}
	settle()
	var args []string
	if b, err := os.ReadFile("/payload.args"); err == nil {
		for _, a := range strings.Split(string(b), "\n") {
			if a != "" {
				args = append(args, a)
			}
		}
	}
	cmd := exec.Command("/payload", args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Dir = "/tmp"
	cmd.Env = []string{"HOME=/tmp", "TMPDIR=/tmp", "PATH=/", "NUMAPOOL_VM_GUEST=1"}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "vminit: %v\n", err)
		return 127
	}
}
