package proccluster

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// Pause stops replica i's process with SIGSTOP: a host that is alive but
// answers nothing, as behind a partition or a stalled disk. Unlike Kill and
// Restart it forks nothing, so a test that holds files open on a mount may
// heal it with Resume while writes are queued (a fork's exec closes the
// test's descriptors, and each close waits for their commits).
// Pause returns once the process is stopped, since a signal is delivered
// asynchronously.
func (c *Cluster) Pause(i int) {
	if c.procs[i] == nil {
		return
	}
	pid := c.procs[i].Process.Pid
	_ = c.procs[i].Process.Signal(syscall.SIGSTOP)
	poll.UntilTrue(c.t, 10*time.Second, fmt.Sprintf("replica-host r%d (pid %d) stops", i, pid), func() bool {
		f := statFields(pid)
		return len(f) > 0 && f[0] == "T"
	})
}

// Resume continues replica i after Pause.
func (c *Cluster) Resume(i int) {
	if c.procs[i] != nil {
		_ = c.procs[i].Process.Signal(syscall.SIGCONT)
	}
}

// CPU returns the processor time (user and system) the running replica
// processes have used so far.
func (c *Cluster) CPU() time.Duration {
	var total time.Duration
	for i := range c.procs {
		if c.procs[i] != nil {
			total += ProcessCPU(c.procs[i].Process.Pid)
		}
	}
	return total
}

// ProcessCPU is the processor time (user and system) a running process has
// used so far; 0 once it is gone.
func ProcessCPU(pid int) time.Duration {
	// utime and stime are fields 14 and 15 of /proc/<pid>/stat, in clock
	// ticks (USER_HZ, 100 on Linux).
	f := statFields(pid)
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// statFields are the fields of /proc/<pid>/stat after the command name
// (which may hold spaces), starting at the state letter (R, S, D, T, ...);
// nil when the process is gone.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
}
