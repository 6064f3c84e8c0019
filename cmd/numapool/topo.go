package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// placement says whether this machine honours pinning and memory policy,
// found by trying both.
type placement struct {
	Pinning      string `json:"pinning"`
	MemoryPolicy string `json:"memory_policy"`
}

type topoOutput struct {
	topology.Summary
	Placement *placement `json:"placement,omitempty"`
}

func topoCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("topo", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	sysfs := fs.String("sysfs", "", "read a captured tree")
	spec := fs.String("spec", "", "synthetic topology")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	t, live, err := loadTopology(*sysfs, *spec)
	if err != nil {
		return err
	}
	name := "this machine"
	if *sysfs != "" {
		name = filepath.Base(filepath.Clean(*sysfs))
	}
	var pl *placement
	if live {
		pl = probePlacement(t)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(topoOutput{Summary: t.Summary(name), Placement: pl})
	}
	writeReport(stdout, t, pl)
	return nil
}

// loadTopology reads the topology the flags ask for; live is true when it
// describes this machine (so that placement can be tried).
func loadTopology(sysfs, spec string) (t *topology.Topology, live bool, err error) {
	if sysfs != "" {
		if st, err := os.Stat(sysfs); err != nil {
			return nil, false, usageError{fmt.Sprintf("--sysfs: %v", err)}
		} else if !st.IsDir() {
			return nil, false, usageError{fmt.Sprintf("--sysfs: %s is not a directory", sysfs)}
		}
		if t, err = topology.FromDir(sysfs); err != nil {
			return nil, false, usageError{fmt.Sprintf("--sysfs %s: %v", sysfs, err)}
		}
	} else {
		t, live = topology.Discover(), true
		addHostDetails(&t.Machine)
	}
	if spec != "" {
		st, err := topology.Synthetic(spec, t)
		if err != nil {
			return nil, false, usageError{"--spec: " + err.Error()}
		}
		t = st
	}
	return t, live, nil
}

// probePlacement pins a thread to the first allowed CPU and allocates a
// page on the first allowed node with memory, and says what happened.
func probePlacement(t *topology.Topology) *placement {
	pl := &placement{}
	cpu := t.OSCPUs(topology.NewCPUSet(t.Allowed.First())).First()
	done := make(chan struct{})
	go func() {
		defer close(done)
		th, err := pin.Lock(topology.NewCPUSet(cpu))
		if err != nil {
			pl.Pinning = "fails: " + err.Error()
			return
		}
		defer th.Restore()
		got, _, err := pin.CurrentCPU()
		switch {
		case err != nil:
			pl.Pinning = "pinned, but getcpu fails: " + err.Error()
		case got != cpu:
			pl.Pinning = fmt.Sprintf("fails: pinned to CPU %d but running on %d", cpu, got)
		default:
			pl.Pinning = fmt.Sprintf("works (a thread pinned to CPU %d ran there)", cpu)
		}
	}()
	<-done
	node := -1
	for _, n := range t.Nodes {
		if n.Allowed && n.HasMemory {
			node = n.ID
			break
		}
	}
	if node < 0 || strings.HasPrefix(t.Source, "synthetic") {
		// Synthetic nodes are not kernel nodes: try the real node 0.
		node = 0
	}
	b, release, err := pin.Alloc(1<<16, node)
	if err != nil {
		pl.MemoryPolicy = "fails: " + err.Error()
		return pl
	}
	defer release()
	got, err := pin.NodeOf(unsafe.Pointer(&b[0]))
	switch {
	case err != nil:
		pl.MemoryPolicy = "mbind works, but the page query fails: " + err.Error()
	case got != node:
		pl.MemoryPolicy = fmt.Sprintf("fails: memory bound to node %d is on node %d", node, got)
	default:
		pl.MemoryPolicy = fmt.Sprintf("works (memory bound to node %d is there)", node)
	}
	return pl
}
