package proccluster

import (
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
)

// FastTiming is the Raft timing of every process test: failover well under
// a second on loopback, and commits sent without waiting for the next
// heartbeat. The zero Timing is production's (hashicorp/raft's defaults),
// which benchmarks run with.
var FastTiming = replica.Timing{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
	LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 10 * time.Millisecond}

// FastTimingFlags are replica-host's flags for FastTiming, for hosts
// configured by flags rather than a standalone file (Kubernetes mode).
func FastTimingFlags() []string {
	return []string{
		"-heartbeat-timeout", FastTiming.HeartbeatTimeout.String(),
		"-election-timeout", FastTiming.ElectionTimeout.String(),
		"-leader-lease-timeout", FastTiming.LeaderLeaseTimeout.String(),
		"-commit-timeout", FastTiming.CommitTimeout.String(),
	}
}
