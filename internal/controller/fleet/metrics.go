package fleet

// Prometheus metrics per fleet (docs/operate.md, Fleet operator metrics):
// gauges for desired, applied and ready members, members down, replacement
// holds in progress, whether the fleet is blocked and for how long; counters
// for member replacements, force-deleted Pods and aborted handoffs. A deleted
// fleet's series are removed.

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// Metrics are the fleet operator's metrics. A nil *Metrics records nothing.
type Metrics struct {
	desired, applied, ready, blocked, blockedAge, down, holds *prometheus.GaugeVec
	replacements, forceDeletes, abortedHandoffs               *prometheus.CounterVec
}

var fleetLabels = []string{"namespace", "fleet"}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "cellfleet", Subsystem: "fleet", Name: name, Help: help}, fleetLabels)
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "cellfleet", Subsystem: "fleet", Name: name, Help: help}, fleetLabels)
	}
	m := &Metrics{
		desired:         gauge("desired_replicas", "Members the fleet's spec asks for."),
		applied:         gauge("applied_replicas", "Members written to the fleet's workload."),
		ready:           gauge("ready_replicas", "Ready members."),
		blocked:         gauge("blocked", "1 while the fleet's Blocked condition is True."),
		blockedAge:      gauge("blocked_age_seconds", "Seconds since the fleet became Blocked (0 when not blocked)."),
		down:            gauge("members_down", "Applied members that have no Pod or are not Ready."),
		holds:           gauge("replacement_holds", "Member Pods whose replacement hold the last reconcile could not settle."),
		replacements:    counter("member_replacements_total", "Members replaced on a fresh disk (handoffs committed)."),
		forceDeletes:    counter("force_deletes_total", "Stranded member Pods force-deleted."),
		abortedHandoffs: counter("aborted_handoffs_total", "Replacement handoffs aborted; the member kept its disk."),
	}
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.desired, m.applied, m.ready, m.blocked, m.blockedAge, m.down, m.holds,
		m.replacements, m.forceDeletes, m.abortedHandoffs}
}

func labelsOf(f *celldv1alpha1.CelldFleet) prometheus.Labels {
	return prometheus.Labels{"namespace": f.Namespace, "fleet": f.Name}
}

// observe sets the gauges from the status just derived and the members the
// reconcile observed.
func (m *Metrics) observe(f *celldv1alpha1.CelldFleet, st celldv1alpha1.CelldFleetStatus, obs *observation, now time.Time) {
	if m == nil {
		return
	}
	l := labelsOf(f)
	m.desired.With(l).Set(float64(st.DesiredReplicas))
	m.applied.With(l).Set(float64(st.AppliedReplicas))
	m.ready.With(l).Set(float64(st.ReadyReplicas))
	blocked, age := 0.0, 0.0
	if st.BlockedSince != nil {
		blocked, age = 1, now.Sub(st.BlockedSince.Time).Seconds()
	}
	m.blocked.With(l).Set(blocked)
	m.blockedAge.With(l).Set(age)
	m.down.With(l).Set(float64(membersDown(obs, st)))
	// Counters start at zero with the fleet, so a rate() sees its first one.
	m.replacements.With(l)
	m.forceDeletes.With(l)
	m.abortedHandoffs.With(l)
}

// membersDown counts applied members without a Ready Pod: by ordinal for a
// StatefulSet fleet, from the Deployment's counts for a Bucket Deployment.
func membersDown(obs *observation, st celldv1alpha1.CelldFleetStatus) int {
	if obs.sts != nil {
		return len(downMembers(obs, obs.applied()))
	}
	return int(max(0, st.AppliedReplicas-st.ReadyReplicas))
}

// setHolds sets the replacement holds still in progress once a reconcile
// has settled what it could (settleHolds): a hold that keeps failing to
// settle is what an administrator must look at.
func (m *Metrics) setHolds(f *celldv1alpha1.CelldFleet, n int) {
	if m != nil {
		m.holds.With(labelsOf(f)).Set(float64(n))
	}
}

func (m *Metrics) countReplacement(f *celldv1alpha1.CelldFleet) {
	if m != nil {
		m.replacements.With(labelsOf(f)).Inc()
	}
}

func (m *Metrics) countForceDelete(f *celldv1alpha1.CelldFleet) {
	if m != nil {
		m.forceDeletes.With(labelsOf(f)).Inc()
	}
}

func (m *Metrics) countAbortedHandoff(f *celldv1alpha1.CelldFleet) {
	if m != nil {
		m.abortedHandoffs.With(labelsOf(f)).Inc()
	}
}

func (m *Metrics) forget(namespace, name string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"namespace": namespace, "fleet": name}
	for _, g := range []*prometheus.GaugeVec{m.desired, m.applied, m.ready, m.blocked, m.blockedAge, m.down, m.holds} {
		g.Delete(l)
	}
	for _, c := range []*prometheus.CounterVec{m.replacements, m.forceDeletes, m.abortedHandoffs} {
		c.Delete(l)
	}
}
