package fleet

// Prometheus gauges per fleet: desired, applied and ready members, whether it
// is blocked and for how long. A deleted fleet's series are removed.

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// Metrics are the fleet operator's gauges. A nil *Metrics records nothing.
type Metrics struct {
	desired, applied, ready, blocked, blockedAge *prometheus.GaugeVec
}

// NewMetrics creates the gauges and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "cellfleet", Subsystem: "fleet", Name: name, Help: help},
			[]string{"namespace", "fleet"})
	}
	m := &Metrics{
		desired:    gauge("desired_replicas", "Members the fleet's spec asks for."),
		applied:    gauge("applied_replicas", "Members written to the fleet's workload."),
		ready:      gauge("ready_replicas", "Ready members."),
		blocked:    gauge("blocked", "1 while the fleet's Blocked condition is True."),
		blockedAge: gauge("blocked_age_seconds", "Seconds since the fleet became Blocked (0 when not blocked)."),
	}
	for _, c := range []prometheus.Collector{m.desired, m.applied, m.ready, m.blocked, m.blockedAge} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(f *celldv1alpha1.CelldFleet, st celldv1alpha1.CelldFleetStatus, now time.Time) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"namespace": f.Namespace, "fleet": f.Name}
	m.desired.With(l).Set(float64(st.DesiredReplicas))
	m.applied.With(l).Set(float64(st.AppliedReplicas))
	m.ready.With(l).Set(float64(st.ReadyReplicas))
	blocked, age := 0.0, 0.0
	if st.BlockedSince != nil {
		blocked, age = 1, now.Sub(st.BlockedSince.Time).Seconds()
	}
	m.blocked.With(l).Set(blocked)
	m.blockedAge.With(l).Set(age)
}

func (m *Metrics) forget(namespace, name string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"namespace": namespace, "fleet": name}
	for _, g := range []*prometheus.GaugeVec{m.desired, m.applied, m.ready, m.blocked, m.blockedAge} {
		g.Delete(l)
	}
}
