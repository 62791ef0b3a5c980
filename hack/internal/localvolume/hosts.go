package localvolume

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/standalone"
)

// Generate writes a volume of three replicas on loopback ports in dir
// (standalone.Generate) with raft timing that fails over within a second,
// so a run with kills spends its time on the workload, not on elections.
func Generate(dir, volume string, capacity uint64) (standalone.Generated, error) {
	ports, err := standalone.FreePortRange(3)
	if err != nil {
		return standalone.Generated{}, err
	}
	status, err := standalone.FreePortRange(3)
	if err != nil {
		return standalone.Generated{}, err
	}
	g, err := standalone.Generate(standalone.GenerateOptions{Dir: dir, Volume: volume, Replicas: 3,
		BasePort: ports, StatusBasePort: status, Capacity: capacity,
		Timing: replica.Timing{HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
			LeaderLeaseTimeout: 250 * time.Millisecond}})
	if err != nil {
		return standalone.Generated{}, fmt.Errorf("generate the volume: %w", err)
	}
	return g, nil
}

// Hosts are the replica-host processes of a generated volume, one per
// replica, their logs in Dir.
type Hosts struct {
	Dir, Bin string
	Gen      standalone.Generated
	cmds     []*exec.Cmd
}

// Start starts replica i's host (once).
func (h *Hosts) Start(i int, extra ...string) error {
	if h.cmds == nil {
		h.cmds = make([]*exec.Cmd, len(h.Gen.HostFiles))
	}
	if h.cmds[i] != nil {
		return nil
	}
	args := append([]string{"-config", h.Gen.HostFiles[i], "-log-level", "warn"}, extra...)
	cmd, err := Start(h.Dir, fmt.Sprintf("replica-host-r%d", i), filepath.Join(h.Bin, "replica-host"), args...)
	if err != nil {
		return err
	}
	h.cmds[i] = cmd
	return nil
}

// PID is replica i's host process, 0 when it does not run.
func (h *Hosts) PID(i int) int {
	if h.cmds == nil || h.cmds[i] == nil {
		return 0
	}
	return h.cmds[i].Process.Pid
}

// Kill sends SIGKILL to replica i's host and reaps it.
func (h *Hosts) Kill(i int) {
	if h.cmds == nil || h.cmds[i] == nil {
		return
	}
	_ = h.cmds[i].Process.Signal(syscall.SIGKILL)
	_ = h.cmds[i].Wait()
	h.cmds[i] = nil
}

// Stop kills every host.
func (h *Hosts) Stop() {
	for i := range h.cmds {
		h.Kill(i)
	}
}
