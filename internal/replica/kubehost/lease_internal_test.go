package kubehost

import (
	"context"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// The heartbeat writes what the volume controller reads (holder, duration,
// renewal time, node label), keeps the acquire time across renewals, and
// the host is ready only while its last renewal is younger than the
// Lease's duration.
func TestHeartbeatRenewsTheNodesLeaseAndReadinessFollowsIt(t *testing.T) {
	ctx := context.Background()
	leases := fake.NewClientset().CoordinationV1().Leases("st")
	clock := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	hb := &Heartbeat{leases: leases, node: "n1", duration: 40 * time.Second, log: slog.Default(), now: func() time.Time { return clock }}
	if err := hb.Ready(); err == nil {
		t.Fatal("ready before the first renewal")
	}
	if err := hb.renew(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := leases.Get(ctx, storagev1alpha1.HostLeaseName("n1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity != "n1" || s.LeaseDurationSeconds == nil || *s.LeaseDurationSeconds != 40 ||
		s.RenewTime == nil || !s.RenewTime.Time.Equal(clock) || l.Labels[storagev1alpha1.LabelNode] != "n1" {
		t.Fatalf("the Lease does not say node n1 renewed at %s for 40s: %+v %v", clock, s, l.Labels)
	}
	acquired := s.AcquireTime.Time
	if err := hb.Ready(); err != nil {
		t.Fatalf("not ready right after a renewal: %v", err)
	}
	clock = clock.Add(10 * time.Second)
	if err := hb.renew(ctx); err != nil {
		t.Fatal(err)
	}
	l, _ = leases.Get(ctx, storagev1alpha1.HostLeaseName("n1"), metav1.GetOptions{})
	if !l.Spec.RenewTime.Time.Equal(clock) || !l.Spec.AcquireTime.Time.Equal(acquired) {
		t.Fatalf("renewal wrote renew %s acquire %s, want renew %s and the first acquire %s", l.Spec.RenewTime, l.Spec.AcquireTime, clock, acquired)
	}
	clock = clock.Add(40 * time.Second)
	if err := hb.Ready(); err == nil {
		t.Fatal("still ready a whole Lease duration after the last renewal")
	}
}
