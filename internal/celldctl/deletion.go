package celldctl

// A volume's pending deletion (docs/operate.md). A claim deleted while a Pod
// uses it waits in Terminating (kubernetes.io/pvc-protection), its
// PersistentVolume waits for the claim, and the ReplicatedVolume waits for
// the volume controller's ordered teardown (docs/volume-controller.md,
// "Deletion"); the volume is Healthy all along, which is right but hides
// that it is on its way out. The report shows one "Deletion:" line per
// object of the chain that is being deleted: since when, and what it waits
// for (its finalizers, and for a claim the Pods that still use it).

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// replicatedDriver is the CSI driver of replicated volumes
// (internal/csi/replicated.DriverName; not imported, so the plugin does not
// link the CSI server).
const replicatedDriver = "replicated.storage.eric.dev"

// provisionerName is csi-provisioner's name for a volume, pvc-<claim uid>
// (the volume controller reads the claim's UID from it the same way:
// internal/controller/volume/orphan.go).
var provisionerName = regexp.MustCompile(`^pvc-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)

// What a finalizer of the chain waits for, in an operator's words.
var finalizerMeaning = map[string]string{
	"kubernetes.io/pvc-protection":                        "a Pod still uses the claim",
	"kubernetes.io/pv-protection":                         "its claim still binds it",
	"external-provisioner.volume.kubernetes.io/finalizer": "csi-provisioner's DeleteVolume",
	storagev1alpha1.FinalizerVolumeTeardown:               "the volume controller's ordered teardown",
}

// pendingDeletion is one object of the chain being deleted.
type pendingDeletion struct {
	what    string // "claim NS/NAME", "PersistentVolume NAME", "volume NAME"
	since   time.Time
	waiting []string
}

// gatherDeletion finds the volume's source claim and PersistentVolume and
// returns the pending deletions of the chain, claim first. A claim or PV
// the user may not read is left out and said so: the rest of the report
// does not depend on them.
func gatherDeletion(ctx context.Context, c client.Reader, v *storagev1alpha1.ReplicatedVolume) ([]pendingDeletion, []string) {
	var out []pendingDeletion
	var unread []string
	if claim, err := sourceClaim(ctx, c, v); err != nil {
		unread = append(unread, err.Error())
	} else if claim != nil && claim.DeletionTimestamp != nil {
		d := pendingDeletion{what: "claim " + claim.Namespace + "/" + claim.Name, since: claim.DeletionTimestamp.Time,
			waiting: finalizersText(claim.Finalizers)}
		users, err := claimUsers(ctx, c, claim)
		switch {
		case err != nil:
			unread = append(unread, err.Error())
		case len(users) > 0:
			d.waiting = append(d.waiting, "used by "+strings.Join(users, ", "))
		}
		out = append(out, d)
	}
	if pv, err := volumePV(ctx, c, v.Name); err != nil {
		unread = append(unread, err.Error())
	} else if pv != nil && pv.DeletionTimestamp != nil {
		out = append(out, pendingDeletion{what: "PersistentVolume " + pv.Name, since: pv.DeletionTimestamp.Time,
			waiting: finalizersText(pv.Finalizers)})
	}
	if v.DeletionTimestamp != nil {
		d := pendingDeletion{what: "volume " + v.Name, since: v.DeletionTimestamp.Time, waiting: finalizersText(v.Finalizers)}
		if cond := meta.FindStatusCondition(v.Status.Conditions, storagev1alpha1.VolumeDeleting.String()); cond != nil && cond.Status == metav1.ConditionTrue {
			d.waiting = append(d.waiting, cond.Reason+": "+cond.Message)
		}
		out = append(out, d)
	}
	return out, unread
}

// sourceClaim is the claim the volume was made for, nil when it is gone or
// a claim of that name is another one (its UID differs from the one the
// volume records, as the volume controller judges it: orphan.go).
func sourceClaim(ctx context.Context, c client.Reader, v *storagev1alpha1.ReplicatedVolume) (*corev1.PersistentVolumeClaim, error) {
	src := v.Spec.Source
	if src.Name == "" {
		return nil, nil
	}
	claim := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: src.Name}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("claim %s/%s not read: %w", src.Namespace, src.Name, err)
	}
	uid := v.Annotations[storagev1alpha1.AnnotationSourceClaimUID]
	if m := provisionerName.FindStringSubmatch(v.Name); uid == "" && m != nil {
		uid = m[1]
	}
	if uid != "" && uid != string(claim.UID) {
		return nil, nil
	}
	return claim, nil
}

// volumePV is the PersistentVolume whose handle is the volume, nil without
// one.
func volumePV(ctx context.Context, c client.Reader, volume string) (*corev1.PersistentVolume, error) {
	var list corev1.PersistentVolumeList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("PersistentVolumes not read: %w", err)
	}
	for i := range list.Items {
		if csi := list.Items[i].Spec.CSI; csi != nil && csi.Driver == replicatedDriver && csi.VolumeHandle == volume {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// claimUsers names the Pods that have not finished and mount the claim:
// what kubernetes.io/pvc-protection waits for.
func claimUsers(ctx context.Context, c client.Reader, claim *corev1.PersistentVolumeClaim) ([]string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(claim.Namespace)); err != nil {
		return nil, fmt.Errorf("list the Pods of namespace %s: %w", claim.Namespace, err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, vol := range p.Spec.Volumes {
			if pvc := vol.PersistentVolumeClaim; pvc != nil && pvc.ClaimName == claim.Name {
				out = append(out, "Pod "+p.Namespace+"/"+p.Name)
				break
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// finalizersText names each finalizer with what it waits for.
func finalizersText(finalizers []string) []string {
	var out []string
	for _, f := range finalizers {
		if m, ok := finalizerMeaning[f]; ok {
			out = append(out, f+" ("+m+")")
		} else {
			out = append(out, f)
		}
	}
	return out
}

// deletionFields are the report's "Deletion:" lines.
func deletionFields(pending []pendingDeletion, unread []string, now time.Time) []field {
	var out []field
	for _, d := range pending {
		waiting := "nothing (it is about to go)"
		if len(d.waiting) > 0 {
			waiting = strings.Join(d.waiting, "; ")
		}
		out = append(out, field{"Deletion", fmt.Sprintf("%s pending since %s (%s), waiting for %s",
			d.what, d.since.UTC().Format(time.RFC3339), age(d.since, now), waiting)})
	}
	if len(unread) > 0 {
		out = append(out, field{"Deletion check", "incomplete: " + strings.Join(unread, "; ")})
	}
	return out
}
