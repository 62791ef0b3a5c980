package volume_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
)

// hostDigest plays a replica's host publishing its state digest.
func (fx *fixture) hostDigest(vr *storagev1alpha1.VolumeReplica, index int64, value string) {
	fx.t.Helper()
	cur := &storagev1alpha1.VolumeReplica{}
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(vr), cur); err != nil {
		fx.t.Fatal(err)
	}
	cur.Status.Digest = &storagev1alpha1.StateDigest{Index: index, Value: value, Time: metav1.NewTime(time.Now().Truncate(time.Second))}
	if err := env.Client.Status().Update(fx.ctx, cur); err != nil {
		fx.t.Fatal(err)
	}
}

func hexDigest(c byte) string { return strings.Repeat(string(c), 64) }

// The comparison rule: digests at equal indexes are compared; equal ones
// are DigestsAgree with the index; a different one is Diverged=True
// DigestMismatch naming the odd replica and the index, robustness
// Degraded (not Faulted: a quorum still serves), one event and one count
// however often it is reconciled; agreement at a later index clears it.
func TestDivergedComparesDigestsAtEqualIndexes(t *testing.T) {
	fx := newFixture(t)
	reg := prometheus.NewRegistry()
	m, err := volume.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(100)
	fx.r, err = volume.New(fx.rec, env.Scheme, volume.Options{Namespace: fx.ns, ManagerNamespace: fx.managerNS, APIReader: env.Client,
		Metrics: m, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	rv := fx.provisioned()
	vrs := fx.replicas(rv.Name)
	fx.hostReport(&vrs[0], storagev1alpha1.RoleCoordinator, true, false, 0)
	fx.hostReport(&vrs[1], storagev1alpha1.RoleFollower, true, false, 0)
	fx.hostReport(&vrs[2], storagev1alpha1.RoleFollower, true, false, 0)
	mismatches := func() float64 {
		return counterValue(t, reg, "cellfleet_volume_replica_digest_mismatches_total", rv.Name)
	}
	check := func(step string, status metav1.ConditionStatus, reason storagev1alpha1.ConditionReason, robustness storagev1alpha1.Robustness, inMessage ...string) *storagev1alpha1.ReplicatedVolume {
		t.Helper()
		fx.converge(rv.Name)
		got := fx.get(rv.Name)
		c := condition(got, storagev1alpha1.VolumeDiverged)
		if c == nil || c.Status != status || c.Reason != reason.String() {
			t.Fatalf("%s: Diverged = %+v, want %s/%s", step, c, status, reason)
		}
		for _, s := range inMessage {
			if !strings.Contains(c.Message, s) {
				t.Errorf("%s: Diverged message %q does not name %q", step, c.Message, s)
			}
		}
		if got.Status.Robustness != robustness {
			t.Errorf("%s: robustness %s, want %s", step, got.Status.Robustness, robustness)
		}
		return got
	}
	check("no digests", metav1.ConditionUnknown, storagev1alpha1.ReasonDigestsPending, storagev1alpha1.RobustnessHealthy)

	for i := range vrs {
		fx.hostDigest(&vrs[i], 100, hexDigest('a'))
	}
	got := check("equal digests", metav1.ConditionFalse, storagev1alpha1.ReasonDigestsAgree, storagev1alpha1.RobustnessHealthy, "index 100")
	for _, s := range got.Status.Replicas {
		if s.Digest == nil || s.Digest.Index != 100 || s.Digest.Value != hexDigest('a') {
			t.Errorf("summary of %s: digest %+v, want index 100 value aaa…", s.Name, s.Digest)
		}
	}

	fx.hostDigest(&vrs[2], 100, hexDigest('b'))
	got = check("one different at the same index", metav1.ConditionTrue, storagev1alpha1.ReasonDigestMismatch, storagev1alpha1.RobustnessDegraded,
		"index 100", vrs[2].Name+": bbbbbbbbbbbb", vrs[0].Name+", "+vrs[1].Name+": aaaaaaaaaaaa")
	if c := condition(got, storagev1alpha1.VolumeDegraded); c == nil || c.Status != metav1.ConditionTrue || c.Reason != storagev1alpha1.ReasonDigestMismatch.String() {
		t.Errorf("Degraded = %+v, want True DigestMismatch", c)
	}
	if c := condition(got, storagev1alpha1.VolumeReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True: a quorum still serves", c)
	}
	fx.converge(rv.Name)
	if _, err := fx.reconcile(rv.Name); err != nil {
		t.Fatal(err)
	}
	if n := mismatches(); n != 1 {
		t.Errorf("cellfleet_volume_replica_digest_mismatches_total = %v after one mismatch reconciled several times, want 1", n)
	}
	if !drained(rec, "Warning "+volume.EventDigestMismatch.String()) {
		t.Error("no DigestMismatch warning event")
	}

	// A lone digest at a new index compares with nothing: the verdict stands.
	fx.hostDigest(&vrs[0], 130, hexDigest('c'))
	fx.hostDigest(&vrs[1], 130, hexDigest('c'))
	check("two agree at a higher index, the third has not digested it yet", metav1.ConditionTrue, storagev1alpha1.ReasonDigestMismatch,
		storagev1alpha1.RobustnessDegraded, "index 100")
	fx.hostDigest(&vrs[2], 130, hexDigest('c'))
	check("all agree at the higher index", metav1.ConditionFalse, storagev1alpha1.ReasonDigestsAgree, storagev1alpha1.RobustnessHealthy,
		"index 130", vrs[0].Name, vrs[1].Name, vrs[2].Name)
	if !drained(rec, "Normal "+volume.EventDigestsAgree.String()) {
		t.Error("no DigestsAgree event after the mismatch cleared")
	}
	if n := mismatches(); n != 1 {
		t.Errorf("mismatch counter %v, want still 1", n)
	}
}

// drained reports whether an event starting with prefix was recorded,
// reading every event recorded so far.
func drained(rec *events.FakeRecorder, prefix string) bool {
	found := false
	for {
		select {
		case e := <-rec.Events:
			if strings.HasPrefix(e, prefix) {
				found = true
			}
		default:
			return found
		}
	}
}

// counterValue is the value of the counter name's series of volumeName in
// reg (0 without one).
func counterValue(t *testing.T, reg *prometheus.Registry, name, volumeName string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "volume" && l.GetValue() == volumeName {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
