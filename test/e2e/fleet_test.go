package e2e

// Fleets under test: how a scenario's fleet is specified, created, observed
// and removed. Every fleet lives in the namespace the local overlay grants the
// operator (celld) and gets its own bucket, so no scenario sees another's
// reservation or disks.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	"github.com/cellfleet/cellfleet/test/e2e/load"
)

const (
	fleetNamespace = "celld"
	replicas       = 3
	storageClass   = "standard" // cluster-up.sh's local-PV class (WaitForFirstConsumer)
	// operatorUser is the fleet manager's ServiceAccount in
	// config/overlays/local.
	operatorUser = "system:serviceaccount:cellfleet-system:cellfleet-manager"
	// storageControllerUser is the storage controller's ServiceAccount
	// there: the volume controller, the CSI controller and its sidecars.
	storageControllerUser = "system:serviceaccount:cellfleet-system:cellfleet-storage-controller"
)

var zones = []string{"zone-a", "zone-b", "zone-c"}

// runtimeImage returns celldsim's image pinned by digest; build 1 or 2
// (make images packs the same binary twice with different digests).
// E2E_CELLDSIM_IMAGE_1 and _2 name them instead, for a cluster that pulls
// them from a registry (docs/local-cluster.md).
func runtimeImage(t *testing.T, build int) string {
	t.Helper()
	requireCluster(t)
	if ref := os.Getenv(fmt.Sprintf("E2E_CELLDSIM_IMAGE_%d", build)); ref != "" {
		return ref
	}
	path := filepath.Join(env.Root, "bin", "images", fmt.Sprintf("celldsim-%d.digest", build))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("celldsim image %d: %v (run make images)", build, err)
	}
	ref, digest, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok {
		t.Fatalf("%s: want \"REF sha256:DIGEST\", got %q", path, b)
	}
	repo, _, _ := strings.Cut(ref, ":")
	return repo + "@" + digest
}

// persistentFleet is the PersistentFleet every scenario starts from: three
// members in three zones on local disks, short drain and grace so faults
// resolve within a suite's time.
func persistentFleet(t *testing.T, name string) *celldv1alpha1.CelldFleet {
	return &celldv1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleetNamespace},
		Spec: celldv1alpha1.CelldFleetSpec{
			Profile:      celldv1alpha1.ProfilePersistentFleet,
			Replicas:     replicas,
			RuntimeImage: runtimeImage(t, 1),
			Storage: celldv1alpha1.Storage{
				Bucket: "qual-" + name, Region: "local",
				StorageClassName: ptr.To(storageClass), SizeGiB: ptr.To(int32(1)),
			},
			Placement: &celldv1alpha1.Placement{Zones: zones, AZCount: int32(len(zones)), Mode: celldv1alpha1.PlacementStrict},
			Lifecycle: &celldv1alpha1.Lifecycle{ShutdownSeconds: 5, TerminationGraceSeconds: 10},
			Env:       []celldv1alpha1.EnvVar{{Name: "CELLD_SIM_BOOTSTRAP_MS", Value: "10000"}},
		},
	}
}

// bucketFleet is a Bucket fleet (a Deployment on emptyDir). celldsim has no
// bucket, so its members keep every acknowledged record on all three members
// (two peer copies) and recover from each other: an emptyDir does not survive
// the member.
func bucketFleet(t *testing.T, name string) *celldv1alpha1.CelldFleet {
	return &celldv1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleetNamespace},
		Spec: celldv1alpha1.CelldFleetSpec{
			Profile:        celldv1alpha1.ProfileBucket,
			BucketWorkload: celldv1alpha1.BucketWorkloadDeployment,
			Replicas:       replicas,
			RuntimeImage:   runtimeImage(t, 1),
			Storage:        celldv1alpha1.Storage{Bucket: "qual-" + name, Region: "local"},
			Placement:      &celldv1alpha1.Placement{Zones: zones, AZCount: int32(len(zones)), Mode: celldv1alpha1.PlacementRelaxed},
			Lifecycle:      &celldv1alpha1.Lifecycle{ShutdownSeconds: 5, TerminationGraceSeconds: 10},
			Env: []celldv1alpha1.EnvVar{
				{Name: "CELLD_SIM_BOOTSTRAP_MS", Value: "10000"},
				{Name: "CELLD_SIM_PEERS", Value: fmt.Sprintf("dns:%s-peers.%s.svc.cluster.local:8081", name, fleetNamespace)},
				{Name: "CELLD_SIM_PEER_COPIES", Value: "2"},
			},
		},
	}
}

// getFleet reads the fleet into a fresh object.
func getFleet(ctx context.Context, t *testing.T, name string) *celldv1alpha1.CelldFleet {
	t.Helper()
	f := &celldv1alpha1.CelldFleet{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: fleetNamespace, Name: name}, f); err != nil {
		t.Fatalf("read fleet %s: %v", name, err)
	}
	return f
}

// updateFleet applies change to a fresh read, retrying on conflicts.
func updateFleet(ctx context.Context, t *testing.T, name string, change func(*celldv1alpha1.CelldFleet)) {
	t.Helper()
	for {
		f := getFleet(ctx, t, name)
		change(f)
		err := env.Client.Update(ctx, f)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update fleet %s: %v", name, err)
		}
	}
}

// memberPods lists the fleet's Pods by the operator's selector label.
func memberPods(ctx context.Context, name string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := env.Client.List(ctx, &pods, client.InNamespace(fleetNamespace),
		client.MatchingLabels{celldv1alpha1.LabelFleet: name})
	return pods.Items, err
}

// memberPod reads one member Pod by name.
func memberPod(ctx context.Context, t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: fleetNamespace, Name: name}, p); err != nil {
		t.Fatalf("read member Pod %s: %v", name, err)
	}
	return p
}

// claim reads a member's claim; nil when absent.
func claim(ctx context.Context, t *testing.T, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	c := &corev1.PersistentVolumeClaim{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: fleetNamespace, Name: name}, c)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("read claim %s: %v", name, err)
	}
	return c
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// settled reports whether the fleet's workload has rolled out to its current
// spec with n Ready members and n ready endpoints behind its Service; the
// reason says what is still missing.
func settled(ctx context.Context, name string, n int) (bool, string) {
	f := &celldv1alpha1.CelldFleet{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: fleetNamespace, Name: name}, f); err != nil {
		return false, err.Error()
	}
	if f.Status.ObservedGeneration < f.Generation {
		return false, "fleet status not yet observed"
	}
	if ok, why := workloadRolledOut(ctx, f, n); !ok {
		return false, why
	}
	pods, err := memberPods(ctx, name)
	if err != nil {
		return false, err.Error()
	}
	ready := 0
	for i := range pods {
		if podReady(&pods[i]) {
			ready++
		}
	}
	if ready != n || len(pods) != n {
		return false, fmt.Sprintf("%d Pods, %d Ready, want %d", len(pods), ready, n)
	}
	if eps := readyEndpoints(ctx, name); eps != n {
		return false, fmt.Sprintf("%d ready endpoints behind Service %s, want %d", eps, name, n)
	}
	return true, ""
}

// workloadRolledOut checks the StatefulSet (PersistentFleet, Ordered) or the
// Deployment (Bucket) the operator renders under the fleet's name.
func workloadRolledOut(ctx context.Context, f *celldv1alpha1.CelldFleet, n int) (bool, string) {
	key := client.ObjectKey{Namespace: f.Namespace, Name: f.Name}
	if f.Spec.Profile == celldv1alpha1.ProfileBucket && f.Spec.BucketWorkload != celldv1alpha1.BucketWorkloadOrdered {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, key, d); err != nil {
			return false, "Deployment: " + err.Error()
		}
		st := d.Status
		done := st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == int32(n) &&
			st.Replicas == int32(n) && st.ReadyReplicas == int32(n)
		return done, fmt.Sprintf("Deployment %+v", st)
	}
	s := &appsv1.StatefulSet{}
	if err := env.Client.Get(ctx, key, s); err != nil {
		return false, "StatefulSet: " + err.Error()
	}
	st := s.Status
	observed := st.ObservedGeneration >= s.Generation
	rolled := st.UpdatedReplicas == int32(n) && st.CurrentRevision == st.UpdateRevision
	counted := st.Replicas == int32(n) && st.ReadyReplicas == int32(n) && ptr.Deref(s.Spec.Replicas, 0) == int32(n)
	return observed && rolled && counted, fmt.Sprintf("StatefulSet generation %d %+v", s.Generation, st)
}

// readyEndpoints counts the ready endpoints of the fleet's application Service.
func readyEndpoints(ctx context.Context, name string) int {
	var slices discoveryv1.EndpointSliceList
	if err := env.Client.List(ctx, &slices, client.InNamespace(fleetNamespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return -1
	}
	n := 0
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if ptr.Deref(e.Conditions.Ready, false) {
				n++
			}
		}
	}
	return n
}

// waitSettled waits until the fleet has n Ready, rolled-out members.
func waitSettled(ctx context.Context, t *testing.T, name string, n int, within time.Duration) {
	t.Helper()
	why := ""
	waitFor(ctx, t, within, func() bool {
		var ok bool
		ok, why = settled(ctx, name, n)
		return ok
	}, func() string { return fmt.Sprintf("fleet %s settles with %d Ready members: %s", name, n, why) })
}

// waitFor polls cond every 250 ms until it holds; on the deadline it fails
// with what() as the requirement that was not met.
func waitFor(ctx context.Context, t *testing.T, within time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("within %s: %s", within, what())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// serviceTarget is the fleet's application Service as this host reaches it.
// On the local cluster kube-proxy programs ClusterIPs in the host's own
// network namespace; any other cluster is reached through the API server's
// Service proxy, with the kubeconfig's credentials.
func serviceTarget(ctx context.Context, t *testing.T, name string) load.Target {
	t.Helper()
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: fleetNamespace, Name: name}, svc); err != nil {
		t.Fatalf("application Service %s: %v", name, err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		t.Fatalf("application Service %s has no ClusterIP and port: %+v", name, svc.Spec)
	}
	port := svc.Spec.Ports[0].Port
	if env.Local {
		return load.Target{Base: fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, port)}
	}
	rt, err := rest.TransportFor(env.Config)
	if err != nil {
		t.Fatalf("transport to the API server's Service proxy: %v", err)
	}
	return load.Target{Transport: rt, Base: fmt.Sprintf("%s/api/v1/namespaces/%s/services/%s:%d/proxy",
		strings.TrimSuffix(env.Config.Host, "/"), fleetNamespace, name, port)}
}

// deleteFleet removes the fleet and what it leaves by design (kept claims of
// removed members, the reservation), so the next scenario starts clean. It
// never judges the operator: the deletion scenario does that itself.
func deleteFleet(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := &celldv1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleetNamespace}}
	if err := env.Client.Delete(ctx, f); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup: delete fleet %s: %v", name, err)
		return
	}
	gone := func() bool {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(f), &celldv1alpha1.CelldFleet{})
		return apierrors.IsNotFound(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !gone() && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	if !gone() {
		t.Errorf("cleanup: fleet %s still present 2 minutes after its deletion", name)
	}
	var claims corev1.PersistentVolumeClaimList
	if err := env.Client.List(ctx, &claims, client.InNamespace(fleetNamespace)); err != nil {
		t.Errorf("cleanup: list the claims of fleet %s: %v", name, err)
	}
	for i := range claims.Items {
		if strings.HasPrefix(claims.Items[i].Name, "data-"+name+"-") {
			if err := env.Client.Delete(ctx, &claims.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: delete claim %s: %v", claims.Items[i].Name, err)
			}
		}
	}
	var res celldv1alpha1.CelldStorageReservationList
	if err := env.Client.List(ctx, &res); err != nil {
		t.Errorf("cleanup: list the storage reservations: %v", err)
	}
	for i := range res.Items {
		if res.Items[i].Spec.Bucket == "qual-"+name {
			if err := env.Client.Delete(ctx, &res.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: delete storage reservation %s: %v", res.Items[i].Name, err)
			}
		}
	}
}
