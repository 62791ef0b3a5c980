package celldctl_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// deletionLines are the report's "Deletion:" lines.
func deletionLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Deletion:") {
			lines = append(lines, l)
		}
	}
	return lines
}

// A claim deleted while a Pod uses it waits in Terminating
// (kubernetes.io/pvc-protection), and so do its PersistentVolume and the
// volume; `kubectl celld volume` said Healthy and nothing else. The report
// shows each pending deletion, since when and what it waits for.
func TestVolumeShowsAPendingDeletionAndWhatItWaitsFor(t *testing.T) {
	ctx := context.Background()
	claimNS := namespace(t, "cellfleet-deleted-claim")
	v := makeVolume(t, "vol-deleting", claimNS)
	if out := mustPlugin(ctx, t, "volume", v.Name); len(deletionLines(out)) != 0 {
		t.Fatalf("a volume nobody deletes shows a deletion:\n%s", out)
	}

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: v.Spec.Source.Name, Namespace: claimNS, Finalizers: []string{"kubernetes.io/pvc-protection"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	if err := env.Client.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: claimNS},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim)
		claim.Finalizers = nil
		_ = env.Client.Update(ctx, claim)
	})

	out := mustPlugin(ctx, t, "volume", v.Name)
	t.Logf("\n%s", out)
	lines := deletionLines(out)
	if len(lines) != 1 {
		t.Fatalf("%d Deletion lines for a Terminating claim, want 1:\n%s", len(lines), out)
	}
	for _, want := range []string{"claim " + claimNS + "/" + claim.Name, "pending since", "waiting for",
		"kubernetes.io/pvc-protection", "Pod " + claimNS + "/db-0"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("Deletion line %q does not say %q", lines[0], want)
		}
	}

	// Its PersistentVolume deleted too: it waits for the claim.
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: unique("pv-deleting"), Finalizers: []string{"kubernetes.io/pv-protection"}},
		Spec: corev1.PersistentVolumeSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "replicated.storage.eric.dev", VolumeHandle: v.Name}}},
	}
	if err := env.Client.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(pv), pv)
		pv.Finalizers = nil
		_ = env.Client.Update(ctx, pv)
	})

	// The volume itself deleted: its teardown waits (here: for its
	// finalizer, which no controller removes in this test).
	var fresh storagev1alpha1.ReplicatedVolume
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(v), &fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Finalizers = []string{storagev1alpha1.FinalizerVolumeTeardown}
	if err := env.Client.Update(ctx, &fresh); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(v), &fresh)
		fresh.Finalizers = nil
		_ = env.Client.Update(ctx, &fresh)
	})
	if err := env.Client.Delete(ctx, &fresh); err != nil {
		t.Fatal(err)
	}
	out = mustPlugin(ctx, t, "volume", v.Name)
	t.Logf("\n%s", out)
	lines = deletionLines(out)
	if len(lines) != 3 {
		t.Fatalf("%d Deletion lines for a Terminating claim, PersistentVolume and volume, want 3:\n%s", len(lines), out)
	}
	if !strings.Contains(lines[1], "PersistentVolume "+pv.Name+" pending since") || !strings.Contains(lines[1], "kubernetes.io/pv-protection") {
		t.Errorf("the PersistentVolume's line %q does not say it waits for kubernetes.io/pv-protection", lines[1])
	}
	if !strings.Contains(out, "volume "+v.Name+" pending since") || !strings.Contains(out, storagev1alpha1.FinalizerVolumeTeardown) {
		t.Errorf("the volume's own pending deletion is not shown with its teardown finalizer:\n%s", out)
	}
}
