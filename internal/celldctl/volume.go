package celldctl

// kubectl celld volume NAME: one ReplicatedVolume as the cluster reports it:
// its provisioning record, robustness and coordinator, its conditions, each
// replica (role, applied index, lag, readiness, lost state, last state
// digest as INDEX/PREFIX, and from the
// VolumeReplica object its namespace, port and why it is not ready), the
// pending deletion of its claim, PersistentVolume or itself (deletion.go)
// and the events about the volume and its replicas.
//
// The per-replica figures are the volume's status summary as the volume
// controller wrote it; a VolumeReplica the summary does not list yet is shown
// from its own status.

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

func newVolumeCommand(o *rootOptions) *cobra.Command {
	return newReportCommand(o, &cobra.Command{
		Use:   "volume NAME",
		Short: "Show one ReplicatedVolume: robustness, coordinator, replicas with lag, conditions and events",
		Example: `  kubectl celld volume pvc-0c6f...
  kubectl celld volume pvc-0c6f... -o wide --watch`,
	}, kindVolume, reportOf{
		gather: func(ctx context.Context, s *session, name string) (report, error) {
			r, err := gatherVolume(ctx, s.c, name)
			if err != nil {
				return nil, err
			}
			return r, nil
		},
		watch: func(_ *session, name string) []watchTarget {
			return []watchTarget{
				{list: &storagev1alpha1.ReplicatedVolumeList{}, opts: []client.ListOption{client.MatchingFields{"metadata.name": name}}},
				{list: &storagev1alpha1.VolumeReplicaList{}},
			}
		},
		// Every VolumeReplica is watched (spec.volumeName is not selectable);
		// only this volume's replicas print the report again.
		concerns: func(name string, obj runtime.Object) bool {
			vr, ok := obj.(*storagev1alpha1.VolumeReplica)
			return !ok || vr.Spec.VolumeName == name
		},
	})
}

// volumeReport is everything volume NAME shows, read at one moment.
type volumeReport struct {
	volume   storagev1alpha1.ReplicatedVolume
	replicas []storagev1alpha1.VolumeReplica
	events   []corev1.Event
	// deleting is the chain's pending deletions (claim, PV, volume) and
	// unread what could not be checked (deletion.go).
	deleting []pendingDeletion
	unread   []string
}

func gatherVolume(ctx context.Context, c client.Reader, name string) (*volumeReport, error) {
	r := &volumeReport{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &r.volume); err != nil {
		return nil, getError(err, kindVolume, "", name)
	}
	// VolumeReplicas live in the driver's namespace and carry their volume
	// in spec.volumeName, which the API cannot select on: list and filter.
	var list storagev1alpha1.VolumeReplicaList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list the replicas of %s %q: %w", kindVolume, name, err)
	}
	for _, vr := range list.Items {
		if vr.Spec.VolumeName == name {
			r.replicas = append(r.replicas, vr)
		}
	}
	sort.Slice(r.replicas, func(i, j int) bool { return r.replicas[i].Name < r.replicas[j].Name })
	r.deleting, r.unread = gatherDeletion(ctx, c, &r.volume)
	var err error
	if r.events, err = eventsAbout(ctx, c, r.about()...); err != nil {
		return nil, fmt.Errorf("events of %s %q: %w", kindVolume, name, err)
	}
	return r, nil
}

func (r *volumeReport) about() []client.Object {
	objs := []client.Object{&r.volume}
	for i := range r.replicas {
		objs = append(objs, &r.replicas[i])
	}
	return objs
}

func (r *volumeReport) objects() []client.Object {
	objs := r.about()
	for i := range r.events {
		objs = append(objs, &r.events[i])
	}
	return objs
}

func (r *volumeReport) print(w io.Writer, opts printers.PrintOptions, now time.Time) error {
	v := &r.volume
	h := replicaHealth(v.Status.Replicas)
	claim := "-"
	if v.Spec.Source.Name != "" {
		claim = v.Spec.Source.Namespace + "/" + v.Spec.Source.Name
	}
	fields := []field{
		{"Name", v.Name}, {"Claim", claim}, {"Access", string(v.Spec.AccessMode)}, {"Capacity", v.Spec.Capacity.String()},
		{"Backing class", v.Spec.BackingStorageClassName},
		{"Replicas", fmt.Sprintf("%d requested, %d ready, %d lagging (max lag %d), %d lost",
			v.Spec.Replicas, h.ready, h.lagging, h.maxLag, h.lost)},
		{"Robustness", robustness(v)}, {"Coordinator", orDash(v.Status.Coordinator)},
		{"Age", age(v.CreationTimestamp.Time, now)},
	}
	fields = append(fields, deletionFields(r.deleting, r.unread, now)...)
	if v.Status.ObservedGeneration != v.Generation {
		fields = append(fields, field{"Observed", fmt.Sprintf("generation %d of %d (the volume controller has not caught up)",
			v.Status.ObservedGeneration, v.Generation)})
	}
	if err := printFields(w, fields); err != nil {
		return err
	}
	if err := printSection(w, "Conditions", conditionsTable(v.Status.Conditions, now), opts); err != nil {
		return err
	}
	if err := printSection(w, "Replicas", r.replicasTable(now), opts); err != nil {
		return err
	}
	return printSection(w, "Events", eventsTable(r.events, now), opts)
}

func (r *volumeReport) replicasTable(now time.Time) *metav1.Table {
	objects := map[string]*storagev1alpha1.VolumeReplica{}
	for i := range r.replicas {
		objects[r.replicas[i].Name] = &r.replicas[i]
	}
	rows := map[string]storagev1alpha1.ReplicaSummary{}
	for _, s := range r.volume.Status.Replicas {
		rows[s.Name] = s
	}
	for name, vr := range objects {
		if _, ok := rows[name]; !ok {
			rows[name] = summaryOf(vr)
		}
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	sort.Strings(names)
	t := newTable(column{name: "Name"}, column{name: "Node"}, column{name: "Role"}, column{name: "Applied"},
		column{name: "Lag"}, column{name: "Ready"}, column{name: "Lost"}, column{name: "Digest"}, column{name: "Reason", wide: true},
		column{name: "Namespace", wide: true}, column{name: "Port", wide: true}, column{name: "Claim", wide: true},
		column{name: "Age"})
	for _, n := range names {
		s := rows[n]
		reason, namespace, port, claim, created := "<none>", "<none>", "<none>", "<none>", "<unknown>"
		digest := s.Digest
		if vr, ok := objects[n]; ok {
			reason, namespace = replicaReason(vr), vr.Namespace
			port, claim, created = fmt.Sprint(vr.Spec.Port), vr.Spec.BackingClaimName, age(vr.CreationTimestamp.Time, now)
			if d := vr.Status.Digest; d != nil && (digest == nil || d.Time.After(digest.Time.Time)) {
				digest = d // the replica's own status is newer than the volume's summary
			}
		}
		addRow(t, nil, s.Name, orNone(s.Node), orNone(string(s.Role)), fmt.Sprint(s.AppliedIndex), fmt.Sprint(s.Lag),
			fmt.Sprint(s.Ready), fmt.Sprint(s.StateLost), digestText(digest), reason, namespace, port, claim, created)
	}
	return t
}

// digestPrefix is how much of a state digest the report shows: enough to
// tell two apart at a glance (-o json has the whole value).
const digestPrefix = 12

// digestText is a replica's last published state digest as
// INDEX/PREFIX, or <none>.
func digestText(d *storagev1alpha1.StateDigest) string {
	if d == nil {
		return "<none>"
	}
	v := d.Value
	if len(v) > digestPrefix {
		v = v[:digestPrefix]
	}
	return fmt.Sprintf("%d/%s", d.Index, v)
}

// summaryOf reads a replica the volume's status does not list yet from the
// replica's own status.
func summaryOf(vr *storagev1alpha1.VolumeReplica) storagev1alpha1.ReplicaSummary {
	return storagev1alpha1.ReplicaSummary{Name: vr.Name, Node: vr.Spec.Node, Role: vr.Status.Role,
		AppliedIndex: vr.Status.AppliedIndex, Lag: vr.Status.Lag, Digest: vr.Status.Digest,
		Ready:     meta.IsStatusConditionTrue(vr.Status.Conditions, storagev1alpha1.ReplicaReady.String()),
		StateLost: meta.IsStatusConditionTrue(vr.Status.Conditions, storagev1alpha1.ReplicaStateLost.String())}
}

// replicaReason says why a replica is not ready, from the first of its
// conditions that holds it back: lost state, admission, publication, Ready.
func replicaReason(vr *storagev1alpha1.VolumeReplica) string {
	conds := vr.Status.Conditions
	if c := meta.FindStatusCondition(conds, storagev1alpha1.ReplicaStateLost.String()); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	for _, t := range []storagev1alpha1.ConditionType{storagev1alpha1.ReplicaAdmitted, storagev1alpha1.ReplicaPublished, storagev1alpha1.ReplicaReady} {
		if c := meta.FindStatusCondition(conds, t.String()); c != nil && c.Status != metav1.ConditionTrue {
			return c.Reason
		}
	}
	if c := meta.FindStatusCondition(conds, storagev1alpha1.ReplicaReady.String()); c != nil {
		return c.Reason
	}
	return "<none>"
}
