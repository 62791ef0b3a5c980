package host

// Test-only fault points: the process tests prove the two-phase history
// (history.go) by killing a real host with SIGKILL at an exact point
// between the phases. A host halts there only when Config.HaltAt names the
// point; cmd/replica-host sets it from the environment variable
// CELLFLEET_TEST_HALT_AT, which no deployment sets. Unset, nothing here
// runs.

import "log/slog"

// FaultPoint names a point in a worker's start where a test may halt it.
type FaultPoint string

// Fault points.
const (
	// FaultAfterIntent: the intent is durable; the identity is not sealed.
	FaultAfterIntent FaultPoint = "after-intent"
	// FaultBeforeSealed: the identity is sealed; the history still says
	// Intent and Raft has not started.
	FaultBeforeSealed FaultPoint = "before-sealed"
)

// HaltEnv is the environment variable cmd/replica-host reads HaltAt from.
const HaltEnv = "CELLFLEET_TEST_HALT_AT"

// CPUProfileEnv names a directory: when set, cmd/replica-host writes a CPU
// profile of its whole life to cpu-<pid>.pprof in it, finished when it
// stops on SIGTERM or SIGINT. Benchmark support (per-process profiles of
// the FUSE benchmarks, docs/performance.md); no deployment sets it, and it
// serves nothing on a listener.
const CPUProfileEnv = "CELLFLEET_TEST_CPU_PROFILE_DIR"

// halt blocks the start at point until the host closes, when the host was
// configured to halt there; the test kills the process meanwhile. It
// returns false when the start must not go on.
func (h *Host) halt(point FaultPoint, spec WorkerSpec) bool {
	if h.cfg.HaltAt != point {
		return true
	}
	h.log.Warn("halting the start at a test fault point", "point", string(point),
		slog.String("volume", spec.Volume), slog.String("replica", spec.Replica))
	<-h.ctx.Done()
	return false
}
