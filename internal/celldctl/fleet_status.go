package celldctl

// kubectl celld status FLEET: one fleet as the cluster reports it. The
// header is the fleet's own status; below it each member Pod with its node,
// readiness and disk, every disk claim of the fleet (kept disks of removed
// members included), the holds that keep something from moving on, the
// fleet's conditions and the events about all of these.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// claimPrefix is the StatefulSet volume claim template's name: member n's
// disk is data-<fleet>-<n>.
const claimPrefix = "data"

func newStatusCommand(o *rootOptions) *cobra.Command {
	return newReportCommand(o, &cobra.Command{
		Use:   "status FLEET",
		Short: "Show one CelldFleet: members, disks, holds, conditions and events",
		Example: `  kubectl celld status web -n prod
  kubectl celld status web -o yaml
  kubectl celld status web --watch`,
	}, kindFleet, reportOf{
		gather: func(ctx context.Context, s *session, name string) (report, error) {
			r, err := gatherFleet(ctx, s.c, s.namespace, name)
			if err != nil {
				return nil, err
			}
			return r, nil
		},
		// The fleet, its member Pods and its disks; a report printed again
		// also shows the events that came meanwhile.
		watch: func(s *session, name string) []watchTarget {
			members := client.MatchingLabels{celldv1alpha1.LabelFleet: name}
			ns := client.InNamespace(s.namespace)
			return []watchTarget{
				{list: &celldv1alpha1.CelldFleetList{}, opts: []client.ListOption{ns, client.MatchingFields{"metadata.name": name}}},
				{list: &corev1.PodList{}, opts: []client.ListOption{ns, members}},
				{list: &corev1.PersistentVolumeClaimList{}, opts: []client.ListOption{ns, members}},
			}
		},
	})
}

// fleetReport is everything status FLEET shows, read at one moment.
type fleetReport struct {
	fleet       celldv1alpha1.CelldFleet
	members     []corev1.Pod
	claims      []corev1.PersistentVolumeClaim
	holds       []corev1.Pod // Pods under a replacement hold of this fleet
	reservation *celldv1alpha1.CelldStorageReservation
	// reservationErr says why the reservation could not be read (a user
	// allowed only in the namespace may not read cluster-scoped objects).
	reservationErr error
	events         []corev1.Event
	zones          map[string]string // zone by node name, "" when unknown
}

func gatherFleet(ctx context.Context, c client.Reader, namespace, name string) (*fleetReport, error) {
	r := &fleetReport{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &r.fleet); err != nil {
		return nil, getError(err, kindFleet, namespace, name)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{celldv1alpha1.LabelFleet: name}); err != nil {
		return nil, fmt.Errorf("list the member Pods of %s %q in namespace %q: %w", kindFleet, name, namespace, err)
	}
	r.members = pods.Items
	var held corev1.PodList
	if err := c.List(ctx, &held, client.InNamespace(namespace),
		client.MatchingLabels{celldv1alpha1.LabelReplacementFleet: string(r.fleet.UID)}); err != nil {
		return nil, fmt.Errorf("list the replacement holds of %s %q in namespace %q: %w", kindFleet, name, namespace, err)
	}
	r.holds = held.Items
	if r.fleet.Spec.Profile == celldv1alpha1.ProfilePersistentFleet {
		var claims corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &claims, client.InNamespace(namespace), client.MatchingLabels{celldv1alpha1.LabelFleet: name}); err != nil {
			return nil, fmt.Errorf("list the disks of %s %q in namespace %q: %w", kindFleet, name, namespace, err)
		}
		r.claims = claims.Items
	}
	if bucket := r.fleet.Spec.Storage.Bucket; bucket != "" {
		var res celldv1alpha1.CelldStorageReservation
		switch err := c.Get(ctx, client.ObjectKey{Name: bucket}, &res); {
		case err == nil:
			r.reservation = &res
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
			r.reservationErr = err
		default:
			return nil, fmt.Errorf("get the reservation of bucket %q: %w", bucket, err)
		}
	}
	var err error
	if r.zones, err = gatherZones(ctx, c, r.members); err != nil {
		return nil, fmt.Errorf("zones of the members of %s %q in namespace %q: %w", kindFleet, name, namespace, err)
	}
	sort.Slice(r.members, func(i, j int) bool { return r.members[i].Name < r.members[j].Name })
	sort.Slice(r.claims, func(i, j int) bool { return r.claims[i].Name < r.claims[j].Name })
	sort.Slice(r.holds, func(i, j int) bool { return r.holds[i].Name < r.holds[j].Name })
	if r.events, err = eventsAbout(ctx, c, r.about()...); err != nil {
		return nil, fmt.Errorf("events of %s %q in namespace %q: %w", kindFleet, name, namespace, err)
	}
	return r, nil
}

// about is the fleet and the objects it is made of, whose events it shows.
func (r *fleetReport) about() []client.Object {
	objs := []client.Object{&r.fleet}
	seen := map[string]bool{}
	for i := range r.members {
		objs = append(objs, &r.members[i])
		seen[r.members[i].Name] = true
	}
	for i := range r.holds {
		if !seen[r.holds[i].Name] { // a held Pod may have lost the fleet label
			objs = append(objs, &r.holds[i])
		}
	}
	for i := range r.claims {
		objs = append(objs, &r.claims[i])
	}
	return objs
}

func (r *fleetReport) objects() []client.Object {
	objs := r.about()
	if r.reservation != nil {
		objs = append(objs, r.reservation)
	}
	for i := range r.events {
		objs = append(objs, &r.events[i])
	}
	return objs
}

func (r *fleetReport) print(w io.Writer, opts printers.PrintOptions, now time.Time) error {
	f, st := &r.fleet, r.fleet.Status
	fields := []field{
		{"Name", f.Name}, {"Namespace", f.Namespace}, {"Profile", string(f.Spec.Profile)},
		{"Image", f.Spec.RuntimeImage}, {"Bucket", f.Spec.Storage.Bucket},
		{"Replicas", fmt.Sprintf("desired %d, applied %d, ready %d, updated %d (spec %d)",
			st.DesiredReplicas, st.AppliedReplicas, st.ReadyReplicas, st.UpdatedReplicas, f.Spec.Replicas)},
	}
	if st.BlockedSince != nil {
		fields = append(fields, field{"Blocked since", fmt.Sprintf("%s (%s)",
			st.BlockedSince.UTC().Format(time.RFC3339), age(st.BlockedSince.Time, now))})
	}
	if len(st.UnschedulableMembers) > 0 {
		fields = append(fields, field{"Unschedulable", strings.Join(st.UnschedulableMembers, ", ")})
	}
	if f.Spec.Maintenance != nil && f.Spec.Maintenance.Paused {
		fields = append(fields, field{"Maintenance", "paused: the operator leaves the workload alone"})
	}
	if st.ObservedGeneration != f.Generation {
		fields = append(fields, field{"Observed", fmt.Sprintf("generation %d of %d (the operator has not caught up)",
			st.ObservedGeneration, f.Generation)})
	}
	if f.DeletionTimestamp != nil {
		fields = append(fields, field{"Deleting", fmt.Sprintf("since %s (%s), finalizers %s",
			f.DeletionTimestamp.UTC().Format(time.RFC3339), age(f.DeletionTimestamp.Time, now), strings.Join(f.Finalizers, ", "))})
	}
	if err := printFields(w, fields); err != nil {
		return err
	}
	sections := []struct {
		title string
		table *metav1.Table
	}{
		{"Conditions", conditionsTable(st.Conditions, now)},
		{"Members", r.membersTable(now)},
		{"Disks", r.disksTable(now)},
		{"Holds", r.holdsTable()},
		{"Events", eventsTable(r.events, now)},
	}
	for _, s := range sections {
		if s.title == "Disks" && f.Spec.Profile != celldv1alpha1.ProfilePersistentFleet {
			continue // Bucket members have no disks
		}
		if err := printSection(w, s.title, s.table, opts); err != nil {
			return err
		}
	}
	return nil
}

func conditionsTable(conds []metav1.Condition, now time.Time) *metav1.Table {
	t := newTable(column{name: "Type"}, column{name: "Status"}, column{name: "Reason"}, column{name: "Since"},
		column{name: "Generation", wide: true}, column{name: "Message"})
	for _, c := range conds {
		addRow(t, nil, c.Type, string(c.Status), c.Reason, age(c.LastTransitionTime.Time, now),
			fmt.Sprint(c.ObservedGeneration), sanitize(c.Message))
	}
	return t
}

func (r *fleetReport) membersTable(now time.Time) *metav1.Table {
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for i := range r.claims {
		claims[r.claims[i].Name] = &r.claims[i]
	}
	t := newTable(column{name: "Name"}, column{name: "Node"}, column{name: "Zone"}, column{name: "Phase"}, column{name: "Ready"},
		column{name: "Restarts"}, column{name: "Revision"}, column{name: "Down Since"}, column{name: "Replacement Due"},
		column{name: "Disk"}, column{name: "Disk Phase"}, column{name: "Disk Served"}, column{name: "IP", wide: true},
		column{name: "Image", wide: true}, column{name: "Age"})
	for i := range r.members {
		p := &r.members[i]
		disk, diskPhase := "-", "-"
		var claim *corev1.PersistentVolumeClaim
		if r.fleet.Spec.Profile == celldv1alpha1.ProfilePersistentFleet {
			disk, diskPhase = claimPrefix+"-"+p.Name, "missing"
			if c, ok := claims[disk]; ok {
				diskPhase, claim = string(c.Status.Phase), c
			}
		}
		h := r.healthOf(p, claim, now)
		node := p.Spec.NodeName
		if node == "" {
			node = "<unscheduled>"
		}
		phase := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		addRow(t, p, p.Name, node, h.zone, phase, fmt.Sprint(podReady(p)), fmt.Sprint(restarts(p)), h.revision, h.downSince, h.due,
			disk, diskPhase, h.served, orNone(p.Status.PodIP), memberImage(p), age(p.CreationTimestamp.Time, now))
	}
	return t
}

func (r *fleetReport) disksTable(now time.Time) *metav1.Table {
	members := map[string]bool{}
	for _, p := range r.members {
		members[claimPrefix+"-"+p.Name] = true
	}
	t := newTable(column{name: "Name"}, column{name: "Phase"}, column{name: "Capacity"}, column{name: "Class"},
		column{name: "Member"}, column{name: "Volume", wide: true}, column{name: "Age"})
	for i := range r.claims {
		c := &r.claims[i]
		member := strings.TrimPrefix(c.Name, claimPrefix+"-")
		if !members[c.Name] {
			member = "<none>: kept disk"
		}
		capacity := c.Status.Capacity.Storage().String()
		if c.Status.Capacity == nil {
			capacity = c.Spec.Resources.Requests.Storage().String()
		}
		class := "<default>"
		if c.Spec.StorageClassName != nil {
			class = *c.Spec.StorageClassName
		}
		phase := string(c.Status.Phase)
		if c.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		addRow(t, c, c.Name, orNone(phase), capacity, class, member, orNone(c.Spec.VolumeName), age(c.CreationTimestamp.Time, now))
	}
	return t
}

// replacementRecord is the part of the operator's handoff record (the
// celld.eric.dev/replacement annotation, docs/fleet-operator.md) a person
// needs to read a hold.
type replacementRecord struct {
	ClaimName string `json:"claimName"`
	Phase     string `json:"phase"`
	Cause     string `json:"cause"`
}

// holdsTable lists what holds the fleet back: member disks in a replacement
// handoff, Pods behind a scheduling gate, and the bucket's reservation.
func (r *fleetReport) holdsTable() *metav1.Table {
	t := newTable(column{name: "Object"}, column{name: "Hold"}, column{name: "Detail"})
	for i := range r.holds {
		p := &r.holds[i]
		detail := "no readable record"
		var rec replacementRecord
		if raw, ok := p.Annotations[celldv1alpha1.AnnotationReplacement]; ok && json.Unmarshal([]byte(raw), &rec) == nil {
			detail = fmt.Sprintf("%s: disk %s (%s)", rec.Phase, rec.ClaimName, rec.Cause)
		}
		if hasFinalizer(p, celldv1alpha1.FinalizerReplacement) {
			detail += ", finalizer " + celldv1alpha1.FinalizerReplacement
		}
		addRow(t, p, "pod/"+p.Name, "replacement", sanitize(detail))
	}
	for i := range r.members {
		p := &r.members[i]
		for _, g := range p.Spec.SchedulingGates {
			addRow(t, p, "pod/"+p.Name, "scheduling gate", g.Name)
		}
	}
	if bucket := r.fleet.Spec.Storage.Bucket; bucket != "" {
		obj := "celldstoragereservation/" + bucket
		switch {
		case r.reservation != nil && r.reservation.Spec.Fleet.UID == string(r.fleet.UID):
			addRow(t, r.reservation, obj, "bucket", "reserved for this fleet")
		case r.reservation != nil:
			ref := r.reservation.Spec.Fleet
			addRow(t, r.reservation, obj, "bucket", fmt.Sprintf("reserved for another fleet: %s/%s (uid %s)", ref.Namespace, ref.Name, ref.UID))
		case apierrors.IsNotFound(r.reservationErr):
			addRow(t, nil, obj, "bucket", "not reserved yet")
		case r.reservationErr != nil:
			addRow(t, nil, obj, "bucket", "unreadable: "+sanitize(r.reservationErr.Error()))
		}
	}
	return t
}

func hasFinalizer(o client.Object, name string) bool {
	for _, f := range o.GetFinalizers() {
		if f == name {
			return true
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// memberImage is the image of the member's first container (celld): during a
// rollout it tells the updated members from the others.
func memberImage(p *corev1.Pod) string {
	if len(p.Spec.Containers) == 0 {
		return "<none>"
	}
	return p.Spec.Containers[0].Image
}
