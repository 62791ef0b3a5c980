package celldctl_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/celldctl"
	"github.com/cellfleet/cellfleet/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func loadSample(t *testing.T, file string, into client.Object) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
}

func TestFleetStatusShowsCountsConditionsAndMembersWithDisks(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "status-fleet"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	var fleet celldv1alpha1.CelldFleet
	loadSample(t, "celld_v1alpha1_celldfleet_persistentfleet.yaml", &fleet)
	fleet.Namespace = ns.Name
	if err := c.Create(ctx, &fleet); err != nil {
		t.Fatalf("create fleet: %v", err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	since := metav1.NewTime(now.Add(-90 * time.Second))
	fleet.Status = celldv1alpha1.CelldFleetStatus{
		ObservedGeneration: fleet.Generation, DesiredReplicas: 3, AppliedReplicas: 3, ReadyReplicas: 2,
		UpdatedReplicas: 3, Replicas: 3, BlockedSince: &since,
		UnschedulableMembers: []string{fleet.Name + "-2"},
		Conditions: []metav1.Condition{{Type: string(celldv1alpha1.ConditionBlocked), Status: metav1.ConditionTrue,
			Reason: "MemberUnschedulable", Message: "member sample-persistent-2 cannot be scheduled",
			LastTransitionTime: since}},
	}
	if err := c.Status().Update(ctx, &fleet); err != nil {
		t.Fatalf("update status: %v", err)
	}
	for i, node := range []string{"node-a", "node-b", ""} {
		name := fleet.Name + "-" + string(rune('0'+i))
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: map[string]string{celldv1alpha1.LabelFleet: fleet.Name}},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "celld", Image: fleet.Spec.RuntimeImage}}},
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			pod.Status.Phase = corev1.PodRunning
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			if err := c.Status().Update(ctx, pod); err != nil {
				t.Fatal(err)
			}
		}
		if i < 2 { // member 2 has no disk yet
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "data-" + name, Namespace: ns.Name,
					Labels: map[string]string{celldv1alpha1.LabelFleet: fleet.Name}},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}
			if err := c.Create(ctx, pvc); err != nil {
				t.Fatal(err)
			}
		}
	}

	var out bytes.Buffer
	if err := celldctl.FleetStatus(ctx, c, ns.Name, fleet.Name, now, &out); err != nil {
		t.Fatalf("FleetStatus: %v", err)
	}
	got := out.String()
	t.Logf("\n%s", got)
	for _, want := range []string{
		"status-fleet/sample-persistent", "PersistentFleet",
		"desired 3, applied 3, ready 2, updated 3",
		"Blocked since:", "(1m30s)", "Unschedulable:  sample-persistent-2",
		"Blocked", "MemberUnschedulable", "member sample-persistent-2 cannot be scheduled",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("fleet status does not show %q", want)
		}
	}
	lines := map[string]string{}
	for _, l := range strings.Split(got, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = l
		}
	}
	checks := map[string][]string{
		"sample-persistent-0": {"node-a", "Running", "true", "data-sample-persistent-0"},
		"sample-persistent-1": {"node-b", "false", "data-sample-persistent-1"},
		"sample-persistent-2": {"<unscheduled>", "missing"},
	}
	for member, wants := range checks {
		l, ok := lines[member]
		if !ok {
			t.Errorf("member %s is not listed", member)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(l, w) {
				t.Errorf("member line %q does not show %q", l, w)
			}
		}
	}
}

func TestFleetStatusOfMissingFleetSaysSo(t *testing.T) {
	var out bytes.Buffer
	err := celldctl.FleetStatus(context.Background(), env.Client, "default", "nope", time.Now(), &out)
	if err == nil || !strings.Contains(err.Error(), "get CelldFleet default/nope") {
		t.Fatalf("status of a missing fleet returned %v, want an error naming it", err)
	}
}

func TestVolumesListsRobustnessCoordinatorAndReplicaHealth(t *testing.T) {
	ctx := context.Background()
	var v storagev1alpha1.ReplicatedVolume
	loadSample(t, "storage_v1alpha1_replicatedvolume.yaml", &v)
	if err := env.Client.Create(ctx, &v); err != nil {
		t.Fatalf("create volume: %v", err)
	}
	v.Status.Robustness = storagev1alpha1.Robustness("Degraded")
	v.Status.Coordinator = v.Name + "-r0"
	v.Status.Replicas = []storagev1alpha1.ReplicaSummary{
		{Name: v.Name + "-r0", Node: "node-a", Ready: true},
		{Name: v.Name + "-r1", Node: "node-b", Ready: true, Lag: 12},
		{Name: v.Name + "-r2", Node: "node-c", StateLost: true},
	}
	if err := env.Client.Status().Update(ctx, &v); err != nil {
		t.Fatalf("update volume status: %v", err)
	}
	var out bytes.Buffer
	if err := celldctl.Volumes(ctx, env.Client, time.Now(), &out); err != nil {
		t.Fatalf("Volumes: %v", err)
	}
	t.Logf("\n%s", out.String())
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, v.Name) {
			line = l
		}
	}
	f := strings.Fields(line)
	// VOLUME CLAIM ACCESS CAPACITY REPLICAS READY LAGGING LOST ROBUSTNESS COORDINATOR AGE
	want := []string{v.Name, "data/db", "ReadWriteOnce", "10Gi", "3", "2", "1", "1", "Degraded", v.Name + "-r0"}
	if len(f) < len(want) {
		t.Fatalf("volume line %q has too few columns", line)
	}
	for i, w := range want {
		if f[i] != w {
			t.Errorf("column %d of %q = %q, want %q", i, line, f[i], w)
		}
	}
}
