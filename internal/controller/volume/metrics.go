package volume

// Prometheus gauges per volume: robustness (one series per level, 1 on the
// current one), replicas requested and ready, and each replica's lag. A
// deleted volume's series are removed. Counters: replacements and state
// digest mismatches (kept after the volume's deletion).

import (
	"github.com/prometheus/client_golang/prometheus"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

var robustnessLevels = []storagev1alpha1.Robustness{
	storagev1alpha1.RobustnessHealthy, storagev1alpha1.RobustnessDegraded, storagev1alpha1.RobustnessFaulted,
}

// Metrics are the volume controller's gauges. A nil *Metrics records nothing.
type Metrics struct {
	robustness, desired, ready, lag *prometheus.GaugeVec
	// replacements counts completed replica replacements; it is kept after
	// a volume's deletion (a counter's series is not removed).
	replacements *prometheus.CounterVec
	// mismatches counts divergences found: replicas publishing different
	// state digests at one applied index (divergence.go).
	mismatches *prometheus.CounterVec
}

// NewMetrics creates the gauges and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	opts := func(name, help string) prometheus.GaugeOpts {
		return prometheus.GaugeOpts{Namespace: "cellfleet", Subsystem: "volume", Name: name, Help: help}
	}
	m := &Metrics{
		robustness: prometheus.NewGaugeVec(opts("robustness", "1 on the volume's current robustness (Healthy, Degraded, Faulted), 0 on the others."),
			[]string{"volume", "robustness"}),
		desired: prometheus.NewGaugeVec(opts("replicas_desired", "Replicas the volume's spec asks for."), []string{"volume"}),
		ready:   prometheus.NewGaugeVec(opts("replicas_ready", "Replicas that are ready voting members."), []string{"volume"}),
		lag: prometheus.NewGaugeVec(opts("replica_lag_entries", "Journal entries a replica is behind its coordinator, as its host last reported."),
			[]string{"volume", "replica"}),
	}
	m.replacements = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "cellfleet", Subsystem: "volume", Name: "replica_replacements_total",
		Help: "Lost replicas replaced: a new replica added and rebuilt, the lost one removed from the Raft configuration and its objects removed."},
		[]string{"volume"})
	m.mismatches = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "cellfleet", Subsystem: "volume", Name: "replica_digest_mismatches_total",
		Help: "Divergences found: replicas of the volume that published different state digests at the same applied index (counted once per index and set of replicas)."},
		[]string{"volume"})
	for _, c := range []prometheus.Collector{m.robustness, m.desired, m.ready, m.lag, m.replacements, m.mismatches} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(volume string, desired int, st storagev1alpha1.ReplicatedVolumeStatus) {
	if m == nil {
		return
	}
	for _, level := range robustnessLevels {
		v := 0.0
		if st.Robustness == level {
			v = 1
		}
		m.robustness.WithLabelValues(volume, string(level)).Set(v)
	}
	ready := 0
	m.lag.DeletePartialMatch(prometheus.Labels{"volume": volume})
	for _, s := range st.Replicas {
		if s.Ready {
			ready++
		}
		m.lag.WithLabelValues(volume, s.Name).Set(float64(s.Lag))
	}
	m.desired.WithLabelValues(volume).Set(float64(desired))
	m.ready.WithLabelValues(volume).Set(float64(ready))
}

func (m *Metrics) forget(volume string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"volume": volume}
	for _, g := range []*prometheus.GaugeVec{m.robustness, m.desired, m.ready, m.lag} {
		g.DeletePartialMatch(l)
	}
}

func (m *Metrics) replaced(volume string) {
	if m == nil {
		return
	}
	m.replacements.WithLabelValues(volume).Inc()
}

func (m *Metrics) digestMismatch(volume string) {
	if m == nil {
		return
	}
	m.mismatches.WithLabelValues(volume).Inc()
}
