package celldctl_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// makeFleet creates, in namespace ns, a PersistentFleet of three members as
// the operator would leave it mid-replacement: member 0 Running and Ready on
// node-a, member 1 on node-b under a committed replacement hold, member 2
// unscheduled behind the zone-release gate with no disk yet, a kept disk of
// a removed member 5, the bucket reserved for the fleet, and an event.
func makeFleet(t *testing.T, ns string) *celldv1alpha1.CelldFleet {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	var fleet celldv1alpha1.CelldFleet
	loadSample(t, "celld_v1alpha1_celldfleet_persistentfleet.yaml", &fleet)
	fleet.Namespace = ns
	fleet.Spec.Storage.Bucket = ns + "-bucket"
	if err := c.Create(ctx, &fleet); err != nil {
		t.Fatalf("create fleet: %v", err)
	}
	since := metav1.NewTime(time.Now().Add(-90 * time.Minute)) // "90m" however slow the test runs
	fleet.Status = celldv1alpha1.CelldFleetStatus{
		ObservedGeneration: fleet.Generation, DesiredReplicas: 3, AppliedReplicas: 3, ReadyReplicas: 1,
		UpdatedReplicas: 3, Replicas: 3, BlockedSince: &since,
		UnschedulableMembers: []string{fleet.Name + "-2"},
		Conditions: []metav1.Condition{{Type: string(celldv1alpha1.ConditionBlocked), Status: metav1.ConditionTrue,
			Reason: string(celldv1alpha1.ReasonMemberUnschedulable), Message: "member sample-persistent-2 cannot be scheduled",
			LastTransitionTime: since}},
	}
	if err := c.Status().Update(ctx, &fleet); err != nil {
		t.Fatalf("update fleet status: %v", err)
	}
	res := &celldv1alpha1.CelldStorageReservation{ObjectMeta: metav1.ObjectMeta{Name: fleet.Spec.Storage.Bucket},
		Spec: celldv1alpha1.CelldStorageReservationSpec{Bucket: fleet.Spec.Storage.Bucket,
			Fleet: celldv1alpha1.FleetReference{Namespace: ns, Name: fleet.Name, UID: string(fleet.UID)}}}
	if err := c.Create(ctx, res); err != nil {
		t.Fatalf("create reservation: %v", err)
	}
	for i, node := range []string{"node-a", "node-b", ""} {
		name := fleet.Name + "-" + string(rune('0'+i))
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{celldv1alpha1.LabelFleet: fleet.Name}},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "celld", Image: fleet.Spec.RuntimeImage}}},
		}
		switch i {
		case 1:
			pod.Labels[celldv1alpha1.LabelReplacementFleet] = string(fleet.UID)
			pod.Annotations = map[string]string{celldv1alpha1.AnnotationReplacement: `{"fleetUID":"` + string(fleet.UID) +
				`","claimName":"data-` + name + `","claimUID":"u","claimResourceVersion":"1","phase":"Committed","cause":"VolumeLost"}`}
			pod.Finalizers = []string{celldv1alpha1.FinalizerReplacement}
		case 2:
			pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: celldv1alpha1.SchedulingGateZoneRelease}}
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		if i == 0 {
			pod.Status.Phase = corev1.PodRunning
			pod.Status.PodIP = "10.1.2.3"
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			if err := c.Status().Update(ctx, pod); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, member := range []string{"0", "1", "5"} { // member 2 has no disk yet; 5 was removed, its disk kept
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-" + fleet.Name + "-" + member, Namespace: ns,
				Labels: map[string]string{celldv1alpha1.LabelFleet: fleet.Name}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
				StorageClassName: fleet.Spec.Storage.StorageClassName,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}
		if err := c.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fleet.Name + ".blocked", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "CelldFleet", APIVersion: celldv1alpha1.GroupVersion.String(), Namespace: ns, Name: fleet.Name, UID: fleet.UID},
		Reason:         "MemberUnschedulable", Message: "member sample-persistent-2 has waited past the replacement delay",
		Type: corev1.EventTypeWarning, Count: 3, LastTimestamp: metav1.NewTime(time.Now().Add(-30 * time.Minute)),
		Source: corev1.EventSource{Component: "celldfleet-operator"},
	}
	if err := c.Create(ctx, ev); err != nil {
		t.Fatalf("create event: %v", err)
	}
	// An event about an object of the same name but another UID (a fleet
	// deleted and recreated) is not this fleet's.
	stale := ev.DeepCopy()
	stale.Name, stale.InvolvedObject.UID, stale.Message = fleet.Name+".stale", "another-uid", "from a predecessor"
	stale.ResourceVersion = ""
	if err := c.Create(ctx, stale); err != nil {
		t.Fatalf("create event: %v", err)
	}
	return &fleet
}

func TestStatusShowsMembersDisksHoldsConditionsAndEvents(t *testing.T) {
	ns := namespace(t, "status-report")
	fleet := makeFleet(t, ns)
	out := mustPlugin(context.Background(), t, "status", fleet.Name, "-n", ns)
	t.Logf("\n%s", out)
	for _, want := range []string{
		"Name:", "sample-persistent", "Namespace:", ns, "PersistentFleet",
		"desired 3, applied 3, ready 1, updated 3", "Blocked since:", "(90m)", "Unschedulable:", "sample-persistent-2",
		"\nConditions:\n", "MemberUnschedulable", "member sample-persistent-2 cannot be scheduled",
		"\nMembers:\n", "\nDisks:\n", "\nHolds:\n", "\nEvents:\n",
		"member sample-persistent-2 has waited past the replacement delay",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fleet status does not show %q", want)
		}
	}
	if strings.Contains(out, "from a predecessor") {
		t.Errorf("fleet status shows an event about another object of the same name")
	}
	rows := map[string][]string{
		"sample-persistent-0":                                  {"node-a", "Running", "true", "data-sample-persistent-0", "Pending"},
		"sample-persistent-1":                                  {"node-b", "false", "data-sample-persistent-1"},
		"sample-persistent-2":                                  {"<unscheduled>", "missing"},
		"data-sample-persistent-5":                             {"<none>: kept disk"},
		"pod/sample-persistent-1":                              {"replacement", "Committed: disk data-sample-persistent-1 (VolumeLost)", celldv1alpha1.FinalizerReplacement},
		"pod/sample-persistent-2":                              {"scheduling gate", celldv1alpha1.SchedulingGateZoneRelease},
		"celldstoragereservation/" + fleet.Spec.Storage.Bucket: {"bucket", "reserved for this fleet"},
	}
	for first, wants := range rows {
		l := lineOf(out, first)
		if l == "" {
			t.Errorf("fleet status has no line for %s", first)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(l, w) {
				t.Errorf("line %q does not show %q", l, w)
			}
		}
	}
	if ev := lineOf(out, "30m"); !strings.Contains(ev, "Warning") || !strings.Contains(ev, "celldfleet/sample-persistent") {
		t.Errorf("event line %q does not show when, type and object", ev)
	}
	if h := header(out, "NAME"); strings.Contains(h, "IP") {
		t.Errorf("default output shows the wide column IP: %q", h)
	}
}

func TestStatusPrintsEveryOutputFormat(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "status-formats")
	fleet := makeFleet(t, ns)
	base := []string{"status", fleet.Name, "-n", ns}

	wide := mustPlugin(ctx, t, append(base, "-o", "wide")...)
	if h := header(wide, "NAME"); !strings.Contains(h, "IP") || !strings.Contains(h, "IMAGE") {
		t.Errorf("-o wide member header %q lacks IP and IMAGE", h)
	}
	if l := lineOf(wide, "sample-persistent-0"); !strings.Contains(l, "10.1.2.3") {
		t.Errorf("-o wide member line %q lacks the Pod IP", l)
	}

	wantKinds := []string{"CelldFleet", "Pod", "PersistentVolumeClaim", "CelldStorageReservation", "Event"}
	for _, format := range []string{"json", "yaml"} {
		out := mustPlugin(ctx, t, append(base, "-o", format)...)
		raw := []byte(out)
		if format == "yaml" {
			var err error
			if raw, err = yaml.YAMLToJSON(raw); err != nil {
				t.Fatalf("-o yaml is not YAML: %v", err)
			}
		}
		var list unstructured.UnstructuredList
		if err := json.Unmarshal(raw, &list.Object); err != nil {
			t.Fatalf("-o %s does not decode: %v\n%s", format, err, out)
		}
		if list.GetKind() != "List" {
			t.Errorf("-o %s kind = %q, want List", format, list.GetKind())
		}
		items, _ := list.Object["items"].([]any)
		kinds := map[string]int{}
		for _, it := range items {
			u := unstructured.Unstructured{Object: it.(map[string]any)}
			kinds[u.GetKind()]++
			if u.GetAPIVersion() == "" {
				t.Errorf("-o %s: %s %q has no apiVersion", format, u.GetKind(), u.GetName())
			}
			if len(u.GetManagedFields()) > 0 {
				t.Errorf("-o %s: %s %q shows managed fields", format, u.GetKind(), u.GetName())
			}
		}
		for _, k := range wantKinds {
			if kinds[k] == 0 {
				t.Errorf("-o %s has no %s (kinds %v)", format, k, kinds)
			}
		}
		if kinds["Pod"] != 3 || kinds["PersistentVolumeClaim"] != 3 || kinds["Event"] != 1 {
			t.Errorf("-o %s has kinds %v, want 3 Pods, 3 claims and the fleet's 1 event", format, kinds)
		}
	}

	names := mustPlugin(ctx, t, append(base, "-o", "name")...)
	for _, want := range []string{"celldfleet.celld.eric.dev/sample-persistent", "pod/sample-persistent-0",
		"persistentvolumeclaim/data-sample-persistent-5", "celldstoragereservation.celld.eric.dev/" + fleet.Spec.Storage.Bucket} {
		if !strings.Contains(names, want+"\n") {
			t.Errorf("-o name does not list %s:\n%s", want, names)
		}
	}
	if got := mustPlugin(ctx, t, append(base, "-o", "jsonpath={.items[0].status.blockedSince}")...); got == "" {
		t.Errorf("-o jsonpath printed nothing")
	}
}

var contextFleetOnce sync.Once

func TestFleetsListsOneNamespaceOrAllOfThemWithANamespaceColumn(t *testing.T) {
	ctx := context.Background()
	a, b := namespace(t, "fleets-a"), namespace(t, "fleets-b")
	for _, ns := range []string{a, b} {
		makeFleet(t, ns)
	}
	contextFleetOnce.Do(func() { // the context's namespace has a fixed name
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: contextNamespace}}); err != nil {
			t.Fatalf("create namespace %s: %v", contextNamespace, err)
		}
		makeFleet(t, contextNamespace)
	})
	one := mustPlugin(ctx, t, "fleets", "-n", a)
	if n := strings.Count(one, "sample-persistent"); n != 1 {
		t.Errorf("fleets -n %s lists %d fleets, want 1:\n%s", a, n, one)
	}
	if h := header(one, "NAME"); strings.Contains(h, "NAMESPACE") || !strings.Contains(h, "BLOCKED") {
		t.Errorf("fleets -n header = %q, want NAME ... BLOCKED without NAMESPACE", h)
	}
	if l := lineOf(one, "sample-persistent"); !strings.Contains(l, "PersistentFleet") || !strings.Contains(l, "MemberUnschedulable") {
		t.Errorf("fleet line %q lacks profile or blocking reason", l)
	}
	all := mustPlugin(ctx, t, "fleets", "-A")
	if h := header(all, "NAMESPACE"); !strings.Contains(h, "NAME") {
		t.Errorf("fleets -A has no NAMESPACE column:\n%s", all)
	}
	for _, ns := range []string{a, b, contextNamespace} {
		if l := lineOf(all, ns); !strings.Contains(l, "sample-persistent") {
			t.Errorf("fleets -A does not list the fleet of %s:\n%s", ns, all)
		}
	}
	ctxOut := mustPlugin(ctx, t, "fleets", "--context", "elsewhere")
	if !strings.Contains(ctxOut, "sample-persistent") {
		t.Errorf("fleets --context elsewhere did not list the fleet of the context's namespace %s:\n%s", contextNamespace, ctxOut)
	}
	wide := mustPlugin(ctx, t, "fleets", "-n", a, "-o", "wide")
	if l := lineOf(wide, "sample-persistent"); !strings.Contains(l, "sample-persistent-2") || !strings.Contains(l, "@sha256:") {
		t.Errorf("fleets -o wide line %q lacks the unschedulable members and the image", l)
	}
	_, stderr, err := plugin(ctx, t, "fleets", "-n", "fleets-none")
	if err != nil || !strings.Contains(stderr, `No fleets found in namespace "fleets-none".`) {
		t.Errorf("fleets in an empty namespace: err %v, stderr %q", err, stderr)
	}
}

func TestStatusWatchShowsTheReportAgainWhenAMemberChanges(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "status-watch")
	fleet := makeFleet(t, ns)
	w := watchInBackground(ctx, t, "status", fleet.Name, "-n", ns, "--watch", "--request-timeout=5s")
	w.waitFor(t, 1, "Members:")
	var pod corev1.Pod
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fleet.Name + "-1"}, &pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(ctx, &pod); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, 2, "Members:")
	printed := w.out.String()
	last := printed[strings.LastIndex(printed, "Name:"):]
	if l := lineOf(last, fleet.Name+"-1"); !strings.Contains(l, "Running") || !strings.Contains(l, "true") {
		t.Errorf("the report printed after the change shows member 1 as %q, want Running and ready", l)
	}
	w.ended(t)
}
