package e2e

// The scenario runner: every qualification scenario starts from a clean
// fleet, runs under continuous write load through the fleet's Service, and
// ends by reading every acknowledged write back and by checking, from the API
// server's audit log, that the operator deleted only what the scenario allows.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	"github.com/cellfleet/cellfleet/test/e2e/cluster"
	"github.com/cellfleet/cellfleet/test/e2e/load"
)

// settleTimeout bounds a fleet's bring-up and each recovery in a scenario.
const settleTimeout = 4 * time.Minute

// scenario is one running qualification scenario.
type scenario struct {
	t      *testing.T
	ctx    context.Context
	name   string // the fleet's name
	start  time.Time
	ledger *load.Ledger
	gen    *load.Generator
	target load.Target // the fleet's application Service
	// allowed are the operator deletions this scenario permits, as
	// "resource/name" (e.g. "pods/q-lost-1"); everything else is a defect.
	allowed []string
	// expected are deletions the operator must have made (a subset of allowed).
	expected []string
	// verifyBefore is set when the scenario ends without a fleet (deletion):
	// the ledger was verified before the fleet went away.
	verified int
	lost     []load.Lost
	skipEnd  bool
}

// result is one row of docs/qualification.md.
type result struct {
	Scenario   string
	Duration   time.Duration
	Acked      int
	Verified   int
	Deletions  []string
	Passed     bool
	FailReason string
}

var (
	resultsMu sync.Mutex
	results   []result
)

// runScenario creates the fleet, starts the load, runs body, then verifies.
func runScenario(t *testing.T, title string, f *celldv1alpha1.CelldFleet, body func(s *scenario)) {
	requireCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	s := &scenario{t: t, ctx: ctx, name: f.Name, start: time.Now(), ledger: load.NewLedger()}
	t.Cleanup(func() { deleteFleet(t, s.name) })
	t.Cleanup(func() { s.record(title) })

	if err := env.Client.Create(ctx, f); err != nil {
		t.Fatalf("create fleet %s: %v", f.Name, err)
	}
	waitSettled(ctx, t, s.name, int(f.Spec.Replicas), settleTimeout)
	s.target = serviceTarget(ctx, t, s.name)
	s.gen = load.Start(s.target, s.name, s.ledger, load.Options{})
	defer s.gen.Stop()
	s.serving("before the fault")

	body(s)

	if !s.skipEnd {
		s.serving("after the scenario")
		s.gen.Stop()
		s.verify()
	}
	s.checkDeletions()
}

// serving waits until the fleet acknowledges further writes.
func (s *scenario) serving(when string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Minute)
	defer cancel()
	if err := s.gen.WaitAcknowledged(ctx, 25); err != nil {
		s.t.Fatalf("fleet %s does not acknowledge writes %s: %v (load %+v)", s.name, when, err, s.gen.Stats())
	}
}

// verify reads every acknowledged write back through the fleet's Service.
func (s *scenario) verify() {
	s.t.Helper()
	s.verified, s.lost = load.Verify(s.ctx, s.target, s.ledger, 10)
	if len(s.lost) > 0 {
		var keys []string
		for _, l := range s.lost[:min(len(s.lost), 10)] {
			keys = append(keys, fmt.Sprintf("%s (%v)", l.Key, l.Err))
		}
		s.t.Errorf("%d of %d acknowledged writes are not readable: nothing acknowledged may be lost; first: %s",
			len(s.lost), s.ledger.Len(), strings.Join(keys, ", "))
	}
	s.t.Logf("ledger: %d acknowledged, %d verified, load %+v", s.ledger.Len(), s.verified, s.gen.Stats())
}

// operatorDeletions are every deletion the operator's ServiceAccount made
// since the scenario started, as "resource/name" ("resource/namespace/name"
// outside the fleet's namespace). Scenarios run one at a time, so all of them
// are this scenario's: a delete of another fleet's object, of a volume or of
// a reservation counts against it as much as one of its own members.
func (s *scenario) operatorDeletions() ([]string, error) {
	all, err := env.Deletions(s.start)
	if err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	var out []string
	for _, d := range all {
		if d.User != operatorUser {
			continue
		}
		name := d.Name
		if d.Namespace != fleetNamespace && d.Namespace != "" {
			name = d.Namespace + "/" + d.Name
		}
		out = append(out, d.Resource+"/"+name)
	}
	return out, nil
}

// checkDeletions fails on any operator deletion the scenario did not allow,
// and on any expected one that did not happen. A cluster without a readable
// audit log cannot say who deleted what, so the scenario fails: the local
// cluster always keeps one (hack/cluster).
func (s *scenario) checkDeletions() {
	s.t.Helper()
	if !env.Has(cluster.PowerAuditLog) {
		s.t.Fatalf("operator deletions cannot be checked: this cluster does not give %s", cluster.PowerAuditLog)
	}
	got, err := s.operatorDeletions()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, d := range got {
		if !slices.Contains(s.allowed, d) && !allowedKind(s.allowed, d) {
			s.t.Errorf("the operator deleted %s, which this scenario must keep", d)
		}
	}
	for _, want := range s.expected {
		if !slices.Contains(got, want) {
			s.t.Errorf("the operator did not delete %s (its deletions: %v)", want, got)
		}
	}
}

// allowedKind matches allowances of the form "resource/*".
func allowedKind(allowed []string, d string) bool {
	res, _, _ := strings.Cut(d, "/")
	return slices.Contains(allowed, res+"/*")
}

// record adds the scenario's row to the summary.
func (s *scenario) record(title string) {
	r := result{Scenario: title, Duration: time.Since(s.start).Round(time.Second), Acked: s.ledger.Len(),
		Verified: s.verified, Passed: !s.t.Failed()}
	switch {
	case env == nil:
	case !env.Has(cluster.PowerAuditLog):
		r.Deletions = []string{"not checked (no audit log)"}
	default:
		if got, err := s.operatorDeletions(); err == nil {
			r.Deletions = got
		} else {
			r.Deletions = []string{"unknown: " + err.Error()}
		}
	}
	if !r.Passed {
		r.FailReason = "see the test log"
		if len(s.lost) > 0 {
			r.FailReason = fmt.Sprintf("%d acknowledged writes lost", len(s.lost))
		}
	}
	resultsMu.Lock()
	results = append(results, r)
	resultsMu.Unlock()
}

// member is "<fleet>-<ordinal>"; claimOf is its claim "data-<fleet>-<ordinal>".
func (s *scenario) member(ordinal int) string  { return fmt.Sprintf("%s-%d", s.name, ordinal) }
func (s *scenario) claimOf(ordinal int) string { return "data-" + s.member(ordinal) }

// allow permits (and with expect, requires) operator deletions.
func (s *scenario) allow(resourceNames ...string) { s.allowed = append(s.allowed, resourceNames...) }
func (s *scenario) expect(resourceNames ...string) {
	s.allow(resourceNames...)
	s.expected = append(s.expected, resourceNames...)
}

// settle waits for the fleet to be back at n Ready rolled-out members.
func (s *scenario) settle(n int) { waitSettled(s.ctx, s.t, s.name, n, settleTimeout) }

// killWorkload kill -9s celldsim in the member's Pod.
func (s *scenario) killWorkload(ordinal int) {
	s.t.Helper()
	p := memberPod(s.ctx, s.t, s.member(ordinal))
	if err := cluster.KillContainerProcess(p.UID, "celldsim"); err != nil {
		s.t.Fatalf("kill -9 the workload of %s: %v", p.Name, err)
	}
}

// nodeOf is the node a member's Pod runs on.
func (s *scenario) nodeOf(ordinal int) string {
	s.t.Helper()
	return memberPod(s.ctx, s.t, s.member(ordinal)).Spec.NodeName
}
