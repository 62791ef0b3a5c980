package host

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cellfleet/cellfleet/internal/replica"
)

// metrics is the host's Prometheus registry. Per-worker gauges are read at
// scrape time, so an idle worker costs no goroutine or timer for metrics.
type metrics struct {
	h             *Host
	reg           *prometheus.Registry
	latency       *prometheus.HistogramVec
	ckptSize      *prometheus.GaugeVec
	restore       *prometheus.HistogramVec
	fenced        *prometheus.CounterVec
	workerRejects atomic.Int64

	rejects, raftState, applied, commit, lag, workers, inUse, limit, waiting *prometheus.Desc
	followerMatch, followerLag, healthy                                      *prometheus.Desc
	readRounds, reads, applyWaits                                            *prometheus.Desc
}

func newMetrics(h *Host) *metrics {
	m := &metrics{h: h, reg: prometheus.NewRegistry()}
	wl := []string{"volume", "replica"}
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cellfleet_replica_commit_latency_seconds",
		Help:    "Time from receiving a mutation to its commit and apply on the coordinator.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, wl)
	m.ckptSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cellfleet_replica_checkpoint_bytes",
		Help: "Size of the last checkpoint this replica captured."}, wl)
	m.restore = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cellfleet_replica_checkpoint_restore_seconds",
		Help: "Duration of installing a checkpoint.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, wl)
	m.fenced = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cellfleet_replica_fenced_calls_total",
		Help: "Calls refused because a newer single-writer mount fenced the caller's session, by path (mutation, read)."},
		[]string{"volume", "replica", "path"})
	m.rejects = prometheus.NewDesc("cellfleet_host_admission_rejected_total",
		"Requests answered pending or unavailable because a host bound was reached.", []string{"bound"}, nil)
	m.raftState = prometheus.NewDesc("cellfleet_replica_raft_state", "1 for the replica's current Raft state.", []string{"volume", "replica", "state"}, nil)
	m.applied = prometheus.NewDesc("cellfleet_replica_applied_index", "Last journal index applied to the state machine.", wl, nil)
	m.commit = prometheus.NewDesc("cellfleet_replica_commit_index", "Last journal index known committed.", wl, nil)
	m.healthy = prometheus.NewDesc("cellfleet_replica_healthy",
		"1 while a running replica is a working member of its group: its journal appends succeed and it keeps up with the coordinator's commits.", wl, nil)
	m.lag = prometheus.NewDesc("cellfleet_replica_lag_entries", "Entries in this replica's journal not yet applied (last index - applied).", wl, nil)
	m.readRounds = prometheus.NewDesc("cellfleet_replica_read_index_rounds_total",
		"Quorum checks of the coordinator's authority made for reads; concurrent reads share one.", wl, nil)
	m.applyWaits = prometheus.NewDesc("cellfleet_replica_apply_backlog_waits_total",
		"Replication requests this follower held until its state machine applied the committed entries before them.", wl, nil)
	m.reads = prometheus.NewDesc("cellfleet_replica_reads_total",
		"Reads served as coordinator after a quorum check of its authority.", wl, nil)
	fl := []string{"volume", "replica", "follower"}
	m.followerMatch = prometheus.NewDesc("cellfleet_replica_follower_match_index",
		"On the coordinator: the highest journal index each follower acknowledged as appended in the current term (Raft's match index).", fl, nil)
	m.followerLag = prometheus.NewDesc("cellfleet_replica_follower_lag_entries",
		"On the coordinator: entries of its journal each follower has not acknowledged yet (last index - the follower's match index).", fl, nil)
	m.workers = prometheus.NewDesc("cellfleet_host_workers", "Hosted workers by lifecycle state.", []string{"state"}, nil)
	m.inUse = prometheus.NewDesc("cellfleet_host_admission_in_use", "Slots in use per host bound.", []string{"bound"}, nil)
	m.limit = prometheus.NewDesc("cellfleet_host_admission_limit", "Configured limit per host bound.", []string{"bound"}, nil)
	m.waiting = prometheus.NewDesc("cellfleet_host_admission_waiting", "Requests queued for a slot per host bound.", []string{"bound"}, nil)
	m.reg.MustRegister(m.latency, m.ckptSize, m.restore, m.fenced, m,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) CommitLatency(v, r string, d time.Duration) {
	m.latency.WithLabelValues(v, r).Observe(d.Seconds())
}
func (m *metrics) Checkpoint(v, r string, n int64) { m.ckptSize.WithLabelValues(v, r).Set(float64(n)) }
func (m *metrics) Restore(v, r string, d time.Duration) {
	m.restore.WithLabelValues(v, r).Observe(d.Seconds())
}
func (m *metrics) Fenced(v, r string, kind replica.FencedKind) {
	m.fenced.WithLabelValues(v, r, string(kind)).Inc()
}
func (m *metrics) rejected(b Bound) {
	if b == BoundWorkers {
		m.workerRejects.Add(1)
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.raftState, m.healthy, m.applied, m.commit, m.lag, m.followerMatch, m.followerLag, m.readRounds, m.reads, m.applyWaits, m.workers, m.inUse, m.limit, m.waiting, m.rejects} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	byState := map[string]int{}
	for _, s := range m.h.Statuses() {
		byState[string(s.State)]++
		if s.RaftState == "" {
			continue
		}
		for _, rs := range []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown} {
			v := 0.0
			if rs.String() == s.RaftState {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(m.raftState, prometheus.GaugeValue, v, s.Volume, s.Replica, rs.String())
		}
		healthy := 0.0
		if s.Healthy {
			healthy = 1
		}
		ch <- prometheus.MustNewConstMetric(m.healthy, prometheus.GaugeValue, healthy, s.Volume, s.Replica)
		ch <- prometheus.MustNewConstMetric(m.applied, prometheus.GaugeValue, float64(s.AppliedIndex), s.Volume, s.Replica)
		ch <- prometheus.MustNewConstMetric(m.commit, prometheus.GaugeValue, float64(s.CommitIndex), s.Volume, s.Replica)
		ch <- prometheus.MustNewConstMetric(m.readRounds, prometheus.CounterValue, float64(s.ReadIndexRounds), s.Volume, s.Replica)
		ch <- prometheus.MustNewConstMetric(m.reads, prometheus.CounterValue, float64(s.Reads), s.Volume, s.Replica)
		ch <- prometheus.MustNewConstMetric(m.applyWaits, prometheus.CounterValue, float64(s.ApplyBacklogWaits), s.Volume, s.Replica)
		ch <- prometheus.MustNewConstMetric(m.lag, prometheus.GaugeValue, float64(s.LastIndex-min(s.AppliedIndex, s.LastIndex)), s.Volume, s.Replica)
		for _, f := range s.Followers {
			ch <- prometheus.MustNewConstMetric(m.followerMatch, prometheus.GaugeValue, float64(f.MatchIndex), s.Volume, s.Replica, f.ID)
			ch <- prometheus.MustNewConstMetric(m.followerLag, prometheus.GaugeValue, float64(f.LagEntries), s.Volume, s.Replica, f.ID)
		}
	}
	for st, n := range byState {
		ch <- prometheus.MustNewConstMetric(m.workers, prometheus.GaugeValue, float64(n), st)
	}
	m.h.mu.Lock()
	hosted := len(m.h.workers)
	m.h.mu.Unlock()
	type bound struct {
		b              Bound
		use, lim, wait int
		rejected       int64
	}
	for _, b := range []bound{
		{BoundWorkers, hosted, m.h.cfg.Limits.MaxWorkers, 0, m.workerRejects.Load()},
		{BoundStarts, m.h.starts.InUse(), m.h.starts.Limit(), m.h.starts.Waiting(), m.h.starts.rejected.Load()},
		{BoundHTTP, m.h.http.InUse(), m.h.http.Limit(), 0, m.h.http.rejected.Load()},
		{BoundCaptures, m.h.captures.InUse(), m.h.captures.Limit(), 0, m.h.captures.rejected.Load()},
		{BoundRebuilds, m.h.out.slots.InUse(), m.h.out.slots.Limit(), 0, m.h.out.slots.rejected.Load()},
	} {
		ch <- prometheus.MustNewConstMetric(m.rejects, prometheus.CounterValue, float64(b.rejected), string(b.b))
		ch <- prometheus.MustNewConstMetric(m.inUse, prometheus.GaugeValue, float64(b.use), string(b.b))
		ch <- prometheus.MustNewConstMetric(m.limit, prometheus.GaugeValue, float64(b.lim), string(b.b))
		ch <- prometheus.MustNewConstMetric(m.waiting, prometheus.GaugeValue, float64(b.wait), string(b.b))
	}
}
