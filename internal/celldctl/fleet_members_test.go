package celldctl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// TestStatusShowsEachMembersRevisionDownTimeReplacementDueServedDiskAndZone
// proves status FLEET shows, per member, its template revision, since when it
// has been down and when the operator will replace it (the operator's record
// in status.members), whether its disk has served, and its zone.
func TestStatusShowsEachMembersRevisionDownTimeReplacementDueServedDiskAndZone(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := namespace(t, "status-healing")
	fleet := makeFleet(t, ns)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"topology.kubernetes.io/zone": "zone-a"}}}
	if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create node: %v", err)
	}
	m0, m1 := fleet.Name+"-0", fleet.Name+"-1"
	disk0 := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + m0}, disk0); err != nil {
		t.Fatal(err)
	}
	label := func(name, rev string, served string) {
		t.Helper()
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			t.Fatal(err)
		}
		p.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
		if served != "" {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[celldv1alpha1.AnnotationServedOn] = served
		}
		if err := c.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	label(m0, "rev-one", string(disk0.UID))
	label(m1, "rev-two", "")

	downSince := metav1.NewTime(time.Now().Add(-20 * time.Minute).Truncate(time.Second))
	due := metav1.NewTime(time.Now().Add(30 * time.Minute).Truncate(time.Second))
	if err := c.Get(ctx, client.ObjectKeyFromObject(fleet), fleet); err != nil {
		t.Fatal(err)
	}
	fleet.Status.Members = []celldv1alpha1.MemberStatus{
		{Name: m0, ReadyRevision: "rev-one"},
		{Name: m1, ReadyRevision: "rev-one", DownSince: &downSince, DownRevision: "rev-two", ReplacementDue: &due},
	}
	if err := c.Status().Update(ctx, fleet); err != nil {
		t.Fatalf("update fleet status: %v", err)
	}

	out := mustPlugin(ctx, t, "status", fleet.Name, "-n", ns)
	t.Logf("\n%s", out)
	for _, h := range []string{"REVISION", "DOWN SINCE", "REPLACEMENT DUE", "DISK SERVED", "ZONE"} {
		if !strings.Contains(header(out, "NAME"), h) { // the first NAME header is the Members section's
			t.Errorf("the Members section must have a %s column", h)
		}
	}
	rows := map[string][]string{
		m0: {"zone-a", "rev-one", "yes (marked)"},
		m1: {"rev-two", downSince.UTC().Format(time.RFC3339), due.UTC().Format(time.RFC3339), "(in ", "no (created for this Pod"},
	}
	for first, wants := range rows {
		l := lineOf(out, first)
		if l == "" {
			t.Errorf("fleet status has no line for %s", first)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(l, w) {
				t.Errorf("member line %q does not show %q", l, w)
			}
		}
	}
}
