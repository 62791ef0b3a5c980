package celldctl_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// makeVolume creates the sample volume under a name made from name, for a claim in claimNS,
// reported Degraded: r0 coordinates, r1 lags 12 entries, r2 lost its state.
func makeVolume(t *testing.T, name, claimNS string) *storagev1alpha1.ReplicatedVolume {
	t.Helper()
	ctx := context.Background()
	var v storagev1alpha1.ReplicatedVolume
	loadSample(t, "storage_v1alpha1_replicatedvolume.yaml", &v)
	v.Name, v.Spec.Source.Namespace = unique(name), claimNS
	if err := env.Client.Create(ctx, &v); err != nil {
		t.Fatalf("create volume: %v", err)
	}
	v.Status.ObservedGeneration = v.Generation
	v.Status.Robustness = storagev1alpha1.RobustnessDegraded
	v.Status.Coordinator = v.Name + "-r0"
	v.Status.Replicas = []storagev1alpha1.ReplicaSummary{
		{Name: v.Name + "-r0", Node: "node-a", Role: storagev1alpha1.RoleCoordinator, AppliedIndex: 120, Ready: true,
			Digest: &storagev1alpha1.StateDigest{Index: 117, Value: strings.Repeat("ab", 32), Time: metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))}},
		{Name: v.Name + "-r1", Node: "node-b", Role: storagev1alpha1.RoleFollower, AppliedIndex: 108, Ready: true, Lag: 12},
		{Name: v.Name + "-r2", Node: "node-c", Role: storagev1alpha1.RoleStopped, StateLost: true},
	}
	v.Status.Conditions = []metav1.Condition{{Type: storagev1alpha1.VolumeDegraded.String(), Status: metav1.ConditionTrue,
		Reason: storagev1alpha1.ReasonReplicaLost.String(), Message: "replica " + v.Name + "-r2 lost its state",
		LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))}}
	if err := env.Client.Status().Update(ctx, &v); err != nil {
		t.Fatalf("update volume status: %v", err)
	}
	return &v
}

func TestVolumesListsRobustnessCoordinatorAndReplicaHealth(t *testing.T) {
	ctx := context.Background()
	data, elsewhere := unique("data"), unique("elsewhere")
	v := makeVolume(t, "vol-list", data)
	other := makeVolume(t, "vol-list-other", elsewhere)
	out := mustPlugin(ctx, t, "volumes")
	t.Logf("\n%s", out)
	if h := header(out, "NAME"); !strings.HasPrefix(h, "NAME") || !strings.Contains(h, "ROBUSTNESS") || strings.Contains(h, "BACKING") {
		t.Errorf("volumes header = %q", h)
	}
	f := strings.Fields(lineOf(out, v.Name))
	// NAME CLAIM ACCESS CAPACITY REPLICAS READY LAGGING LOST ROBUSTNESS COORDINATOR AGE
	want := []string{v.Name, data + "/db", "ReadWriteOnce", "10Gi", "3", "2", "1", "1", "Degraded", v.Name + "-r0"}
	if len(f) < len(want) {
		t.Fatalf("volume line %q has too few columns", lineOf(out, v.Name))
	}
	for i, w := range want {
		if f[i] != w {
			t.Errorf("column %d of %q = %q, want %q", i, lineOf(out, v.Name), f[i], w)
		}
	}
	if lineOf(out, other.Name) == "" {
		t.Errorf("volumes without -n does not list %s", other.Name)
	}

	narrowed := mustPlugin(ctx, t, "volumes", "-n", data)
	if lineOf(narrowed, v.Name) == "" || lineOf(narrowed, other.Name) != "" {
		t.Errorf("volumes -n data should list only the volumes of claims in data:\n%s", narrowed)
	}
	if all := mustPlugin(ctx, t, "volumes", "-n", data, "-A"); lineOf(all, other.Name) == "" {
		t.Errorf("volumes -A -n data should list every volume:\n%s", all)
	}

	wide := mustPlugin(ctx, t, "volumes", "-o", "wide")
	if l := lineOf(wide, v.Name); !strings.Contains(l, "local-storage") || !strings.Contains(l, "node-a,node-b,node-c") || !strings.Contains(l, " 12 ") {
		t.Errorf("volumes -o wide line %q lacks the backing class, nodes or max lag", l)
	}

	var list unstructured.UnstructuredList
	if err := json.Unmarshal([]byte(mustPlugin(ctx, t, "volumes", "-n", data, "-o", "json")), &list.Object); err != nil {
		t.Fatalf("volumes -o json: %v", err)
	}
	items, _ := list.Object["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["kind"] != "ReplicatedVolume" {
		t.Errorf("volumes -n data -o json items = %v, want the one ReplicatedVolume", items)
	}
	if names := mustPlugin(ctx, t, "volumes", "-n", data, "-o", "name"); names != "replicatedvolume.storage.eric.dev/"+v.Name+"\n" {
		t.Errorf("volumes -o name = %q", names)
	}
}

func TestVolumeShowsEachReplicaWithRoleLagAndWhyItIsNotReady(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "cellfleet-volume-report")
	v := makeVolume(t, "vol-report", "data")
	for i, node := range []string{"node-a", "node-b", "node-c", "node-d"} {
		vr := &storagev1alpha1.VolumeReplica{
			ObjectMeta: metav1.ObjectMeta{Name: v.Name + "-r" + string(rune('0'+i)), Namespace: ns},
			Spec: storagev1alpha1.VolumeReplicaSpec{VolumeName: v.Name, Node: node, Port: int32(7000 + i),
				BackingClaimName: v.Name + "-r" + string(rune('0'+i))},
		}
		if err := env.Client.Create(ctx, vr); err != nil {
			t.Fatalf("create replica: %v", err)
		}
		if i == 3 { // a replacement the volume's summary does not list yet, waiting for admission
			vr.Status.Role = storagev1alpha1.RoleStopped
			vr.Status.Conditions = []metav1.Condition{{Type: storagev1alpha1.ReplicaAdmitted.String(), Status: metav1.ConditionFalse,
				Reason: storagev1alpha1.ReasonAdmissionPending.String(), Message: "2 of 2 rebuilds running",
				LastTransitionTime: metav1.Now()}}
			vr.Status.Digest = &storagev1alpha1.StateDigest{Index: 99, Value: strings.Repeat("cd", 32), Time: metav1.Now()}
			if err := env.Client.Status().Update(ctx, vr); err != nil {
				t.Fatal(err)
			}
		}
	}
	// An event about the cluster-scoped volume, in the namespace a recorder puts it.
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: v.Name + ".placed", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "ReplicatedVolume", APIVersion: storagev1alpha1.GroupVersion.String(),
			Name: v.Name, UID: v.UID},
		Reason: "ReplacingReplica", Message: "replacing " + v.Name + "-r2 on node-d", Type: corev1.EventTypeNormal,
		LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "volume-controller"},
	}
	if err := env.Client.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}

	out := mustPlugin(ctx, t, "volume", v.Name, "-o", "wide")
	t.Logf("\n%s", out)
	for _, want := range []string{"Robustness:", "Degraded", "Coordinator:", v.Name + "-r0", "data/db", "local-storage",
		"3 requested, 2 ready, 1 lagging (max lag 12), 1 lost", "ReplicaLost", "replacing " + v.Name + "-r2 on node-d"} {
		if !strings.Contains(out, want) {
			t.Errorf("volume report does not show %q", want)
		}
	}
	rows := map[string][]string{
		v.Name + "-r0": {"node-a", "Coordinator", "120", "0", "true", "false", "117/abababababab ", ns, "7000"},
		v.Name + "-r1": {"node-b", "Follower", "108", "12", "true", "<none>"},
		v.Name + "-r2": {"node-c", "Stopped", "false", "true"},
		v.Name + "-r3": {"node-d", "Stopped", "99/cdcdcdcdcdcd ", "AdmissionPending", "7003"},
	}
	for name, wants := range rows {
		f := strings.Fields(lineOf(out, name))
		if len(f) == 0 {
			t.Errorf("volume report does not list replica %s", name)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(strings.Join(f, " "), w) {
				t.Errorf("replica line %v does not show %q", f, w)
			}
		}
	}
	// NAME NODE ROLE APPLIED LAG READY LOST: the lag is its own column.
	if f := strings.Fields(lineOf(out, v.Name+"-r1")); len(f) < 5 || f[4] != "12" {
		t.Errorf("replica r1 line %v: LAG column is not 12", f)
	}

	var list unstructured.UnstructuredList
	if err := json.Unmarshal([]byte(mustPlugin(ctx, t, "volume", v.Name, "-o", "json")), &list.Object); err != nil {
		t.Fatalf("volume -o json: %v", err)
	}
	kinds := map[string]int{}
	for _, it := range list.Object["items"].([]any) {
		kinds[it.(map[string]any)["kind"].(string)]++
	}
	if kinds["ReplicatedVolume"] != 1 || kinds["VolumeReplica"] != 4 || kinds["Event"] != 1 {
		t.Errorf("volume -o json kinds = %v, want the volume, its 4 replicas and its event", kinds)
	}
}

func TestVolumesWatchPrintsEachChangeUntilTheRequestTimeout(t *testing.T) {
	ctx := context.Background()
	claims := unique("watched")
	v := makeVolume(t, "vol-watch", claims)
	w := watchInBackground(ctx, t, "volumes", "-n", claims, "--watch", "--request-timeout=4s")
	w.waitFor(t, 1, "Degraded")
	var fresh storagev1alpha1.ReplicatedVolume
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(v), &fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Status.Robustness = storagev1alpha1.RobustnessHealthy
	fresh.Status.Replicas[2] = storagev1alpha1.ReplicaSummary{Name: v.Name + "-r3", Node: "node-d", Ready: true}
	if err := env.Client.Status().Update(ctx, &fresh); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, 1, "Healthy")
	w.ended(t)
	got := w.out.String()
	t.Logf("\n%s", got)
	if n := strings.Count(got, "ROBUSTNESS"); n != 1 {
		t.Errorf("--watch printed the header %d times, want once", n)
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if f := strings.Fields(lines[len(lines)-1]); len(f) < 9 || f[0] != v.Name || f[5] != "3" || f[8] != "Healthy" {
		t.Errorf("the watched row %v does not show 3 ready and Healthy", f)
	}
}

func TestVolumeWatchFollowsOnlyItsOwnReplicasAndEndsWhenTheVolumeIsDeleted(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "cellfleet-volume-watch")
	v := makeVolume(t, "vol-followed", "data")
	// r9 is not in the volume's summary, so its row shows its own status.
	var replicas []*storagev1alpha1.VolumeReplica
	for _, volume := range []string{unique("vol-unrelated"), v.Name} {
		name := volume + "-r9"
		vr := &storagev1alpha1.VolumeReplica{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       storagev1alpha1.VolumeReplicaSpec{VolumeName: volume, Node: "node-d", Port: 7100, BackingClaimName: name},
		}
		if err := env.Client.Create(ctx, vr); err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, vr)
	}
	const section = "\nReplicas:\n"
	w := watchInBackground(ctx, t, "volume", v.Name, "--watch", "--request-timeout=5s")
	w.waitFor(t, 1, section)
	// The unrelated replica changes first, on the same watch stream, so by
	// the time r9's change is shown, the unrelated one was seen too.
	for _, vr := range replicas {
		vr.Status.Role = storagev1alpha1.RoleFollower
		vr.Status.Lag = 7
		if err := env.Client.Status().Update(ctx, vr); err != nil {
			t.Fatal(err)
		}
	}
	w.waitFor(t, 1, "Follower      0         7")
	if err := env.Client.Delete(ctx, v, client.Preconditions{UID: &v.UID}); err != nil {
		t.Fatal(err)
	}
	w.ended(t)
	if n := strings.Count(w.out.String(), section); n != 2 {
		t.Errorf("volume --watch printed the report %d times, want twice: another volume's replica changed it:\n%s", n, w.out.String())
	}
	if want := `replicatedvolume "` + v.Name + `" was deleted`; !strings.Contains(w.errOut.String(), want) {
		t.Errorf("volume --watch stderr %q does not say %q", w.errOut.String(), want)
	}
}
