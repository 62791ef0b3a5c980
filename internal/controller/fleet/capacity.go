package fleet

// The capacity policy (docs/fleet-operator.md, "Capacity policy"). Modes:
//
//   - Shadow records each recommendation's decision in the capacity history
//     and changes nothing;
//   - ScaleOut applies a recommendation's growth and never contracts;
//   - Automatic applies growth and contraction; contraction needs
//     survivor-capacity evidence, else CapacityUncertain;
//   - External leaves spec.replicas to an external system writing the scale
//     subresource; the operator still refuses a contraction without
//     survivor-capacity evidence (CapacityUncertain).
//
// A policy addition that spans kept and fresh disks is cut at the end of its
// first run and recorded as that step: the rest is added only if the policy
// asks again (a new recommendation id). The history lives in the bucket
// reservation's annotation, the one piece of fleet-wide state the operator
// keeps; each step is recorded before spec.replicas is written, so a step is
// never applied twice, and a recorded step whose write failed is resumed.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

const (
	// survivorEvidenceMaxAge bounds how old survivor-capacity evidence may be.
	survivorEvidenceMaxAge = 15 * time.Minute
	// capacityHistoryLimit bounds the history kept in the annotation.
	capacityHistoryLimit = 20
)

type recommendation struct {
	ID       string `json:"id"`
	Replicas int32  `json:"replicas"`
}

type survivorEvidence struct {
	Replicas   int32       `json:"replicas"`
	ObservedAt metav1.Time `json:"observedAt"`
}

func capacityMode(f *celldv1alpha1.CelldFleet) celldv1alpha1.CapacityMode {
	if f.Spec.Capacity == nil {
		return ""
	}
	return f.Spec.Capacity.Mode
}

func readRecommendation(f *celldv1alpha1.CelldFleet) (recommendation, bool) {
	var r recommendation
	raw, ok := f.Annotations[celldv1alpha1.AnnotationCapacityRecommendation]
	if !ok || json.Unmarshal([]byte(raw), &r) != nil || r.ID == "" || r.Replicas < 1 {
		return recommendation{}, false
	}
	return r, true
}

// survivorsSuffice says fresh evidence shows the load fits on n members.
func (r *Reconciler) survivorsSuffice(f *celldv1alpha1.CelldFleet, n int32) bool {
	var e survivorEvidence
	raw, ok := f.Annotations[celldv1alpha1.AnnotationSurvivorCapacity]
	if !ok || json.Unmarshal([]byte(raw), &e) != nil || e.Replicas < 1 {
		return false
	}
	return e.Replicas <= n && r.clock.Since(e.ObservedAt.Time) <= survivorEvidenceMaxAge
}

// contractionNeedsEvidence says the policy requires survivor-capacity
// evidence before the fleet shrinks.
func contractionNeedsEvidence(f *celldv1alpha1.CelldFleet) bool {
	m := capacityMode(f)
	return m == celldv1alpha1.CapacityAutomatic || m == celldv1alpha1.CapacityExternal
}

func capacityUncertain(f *celldv1alpha1.CelldFleet, target int32) *finding {
	return blocked(celldv1alpha1.ReasonCapacityUncertain,
		"contraction to %d members has no fresh survivor-capacity evidence (annotation %s with replicas <= %d, observed within %s); the fleet keeps its members",
		target, celldv1alpha1.AnnotationSurvivorCapacity, target, survivorEvidenceMaxAge)
}

// applyCapacityPolicy acts on the capacity recommendation. It returns a
// finding only for CapacityUncertain, which does not stop the reconcile.
func (r *Reconciler) applyCapacityPolicy(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation) (*finding, error) {
	mode := capacityMode(f)
	rec, ok := readRecommendation(f)
	if !ok || mode == "" || mode == celldv1alpha1.CapacityExternal {
		return nil, nil
	}
	history, err := r.capacityHistory(ctx, f)
	if err != nil {
		return nil, err
	}
	for _, s := range history {
		if s.ID != rec.ID {
			continue
		}
		if !s.Shadow && f.Spec.Replicas == s.From && s.To != s.From {
			return nil, r.writeReplicas(ctx, f, s.To) // recorded, not yet written
		}
		return nil, nil // this recommendation was already decided
	}
	c := f.Spec.Capacity
	cur := f.Spec.Replicas
	target := min(max(rec.Replicas, c.MinReplicas), c.MaxReplicas)
	target = min(max(target, cur-c.Step), cur+c.Step)
	switch {
	case target == cur:
		return nil, nil
	case target > cur:
		target = runEnd(f, obs, cur, target) // cut at the end of its first run
	case mode == celldv1alpha1.CapacityScaleOut:
		return nil, nil // never contracts
	case !r.survivorsSuffice(f, target):
		return capacityUncertain(f, target), nil
	}
	step := capacityStep{ID: rec.ID, From: cur, To: target, At: metav1.NewTime(r.clock.Now()), Shadow: mode == celldv1alpha1.CapacityShadow}
	if err := r.recordCapacityStep(ctx, f, step); err != nil {
		return nil, err
	}
	r.announceCapacityStep(f, mode, step)
	if step.Shadow {
		return nil, nil
	}
	return nil, r.writeReplicas(ctx, f, target)
}

func (r *Reconciler) writeReplicas(ctx context.Context, f *celldv1alpha1.CelldFleet, n int32) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &celldv1alpha1.CelldFleet{}
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(f), fresh); err != nil {
			return err
		}
		fresh.Spec.Replicas = n
		if err := r.client.Update(ctx, fresh); err != nil {
			return err
		}
		f.Spec.Replicas, f.Generation, f.ResourceVersion = n, fresh.Generation, fresh.ResourceVersion
		return nil
	})
	if err != nil {
		return fmt.Errorf("apply capacity step to %d members: %w", n, err)
	}
	r.log.Info("capacity policy changed the replica count", "fleet", f.Name, "namespace", f.Namespace, "replicas", n)
	return nil
}

func (r *Reconciler) capacityHistory(ctx context.Context, f *celldv1alpha1.CelldFleet) ([]capacityStep, error) {
	res := &celldv1alpha1.CelldStorageReservation{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: f.Spec.Storage.Bucket}, res); err != nil {
		return nil, fmt.Errorf("read capacity history: %w", err)
	}
	var s reservationState
	if raw := res.Annotations[celldv1alpha1.AnnotationReservationState]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &s) // an unreadable history is no history
	}
	return s.Capacity, nil
}

func (r *Reconciler) recordCapacityStep(ctx context.Context, f *celldv1alpha1.CelldFleet, step capacityStep) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		res := &celldv1alpha1.CelldStorageReservation{}
		if err := r.client.Get(ctx, client.ObjectKey{Name: f.Spec.Storage.Bucket}, res); err != nil {
			return err
		}
		var s reservationState
		if raw := res.Annotations[celldv1alpha1.AnnotationReservationState]; raw != "" {
			_ = json.Unmarshal([]byte(raw), &s)
		}
		s.Capacity = append(s.Capacity, step)
		if len(s.Capacity) > capacityHistoryLimit {
			s.Capacity = s.Capacity[len(s.Capacity)-capacityHistoryLimit:]
		}
		b, _ := json.Marshal(s)
		if res.Annotations == nil {
			res.Annotations = map[string]string{}
		}
		res.Annotations[celldv1alpha1.AnnotationReservationState] = string(b)
		return r.client.Update(ctx, res)
	})
	if err != nil {
		return fmt.Errorf("record capacity step: %w", err)
	}
	return nil
}

// announceCapacityStep records the event of a step just recorded in the
// capacity history: each recommendation is decided once, so is its event.
func (r *Reconciler) announceCapacityStep(f *celldv1alpha1.CelldFleet, mode celldv1alpha1.CapacityMode, step capacityStep) {
	verdict := "applied"
	if step.Shadow {
		verdict = "recorded only (Shadow)"
	}
	r.event(f, corev1.EventTypeNormal, eventCapacityStep, "Scale",
		"capacity policy %s: recommendation %s takes the fleet from %d to %d members, %s", mode, step.ID, step.From, step.To, verdict)
}
