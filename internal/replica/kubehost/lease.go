package kubehost

// The host's heartbeat (docs/decisions/0011-node-leases.md): a
// coordination.k8s.io/v1 Lease per node in the storage namespace, renewed
// the way kubelet renews its node Lease: holderIdentity is the node,
// leaseDurationSeconds the flag's duration, renewTime the last renewal,
// renewed every quarter of the duration. The volume controller judges a
// replica's host gone only when this Lease is absent or expired, so one
// sick worker, or a follower rebuilding for hours, never makes the
// controller replace the node's healthy replicas. A renewal proves what the
// controller needs to know: this process runs and reaches the API server.
//
// The renewal is also the host's readiness in Kubernetes mode (Ready): a
// host that cannot renew cannot report its replicas either.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Lease duration bounds: the default is kubelet's node Lease duration; a
// Lease shorter than a few seconds would expire on an API server's hiccup.
const (
	DefaultLeaseDuration = 40 * time.Second
	MinLeaseDuration     = 2 * time.Second
	MaxLeaseDuration     = 10 * time.Minute
)

// renewRetry paces renewals after a failed one: sooner than the regular
// quarter, so one lost request does not cost a whole interval.
const renewRetry = time.Second

// Heartbeat renews the host's Lease until its context ends.
type Heartbeat struct {
	leases   coordinationclient.LeaseInterface
	node     string
	duration time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex
	renewed time.Time // the last successful renewal, zero before it
	err     error     // the last failure, nil after a success
}

// NewHeartbeat prepares the Lease renewal of node's host in namespace.
func NewHeartbeat(cfg *rest.Config, namespace, node string, duration time.Duration, log *slog.Logger) (*Heartbeat, error) {
	if duration < MinLeaseDuration || duration > MaxLeaseDuration || duration%time.Second != 0 {
		return nil, fmt.Errorf("the lease duration must be whole seconds between %s and %s (leaseDurationSeconds), got %s",
			MinLeaseDuration, MaxLeaseDuration, duration)
	}
	if node == "" || namespace == "" {
		return nil, errors.New("the host's Lease needs the node and the storage namespace")
	}
	c, err := coordinationclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client of the host's Lease: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Heartbeat{leases: c.Leases(namespace), node: node, duration: duration, log: log, now: time.Now}, nil
}

// Run renews the Lease every quarter of its duration until ctx ends.
func (hb *Heartbeat) Run(ctx context.Context) {
	for {
		wait := hb.duration / 4
		if err := hb.renew(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			hb.log.Warn("host Lease not renewed", "node", hb.node, "lease", storagev1alpha1.HostLeaseName(hb.node), "error", err)
			wait = min(wait, renewRetry)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Ready says whether the last renewal is younger than the Lease's duration:
// the controller still sees this host alive, and it reaches the API server.
func (hb *Heartbeat) Ready() error {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	switch {
	case hb.renewed.IsZero() && hb.err != nil:
		return fmt.Errorf("the host's Lease was never renewed: %w", hb.err)
	case hb.renewed.IsZero():
		return errors.New("the host's Lease is not renewed yet")
	case hb.now().Sub(hb.renewed) < hb.duration:
		return nil
	case hb.err != nil:
		return fmt.Errorf("the host's Lease was last renewed at %s, longer ago than its %s: %w",
			hb.renewed.UTC().Format(time.RFC3339), hb.duration, hb.err)
	}
	return fmt.Errorf("the host's Lease was last renewed at %s, longer ago than its %s", hb.renewed.UTC().Format(time.RFC3339), hb.duration)
}

// renew writes renewTime (creating the Lease when it is missing) and
// records the outcome for Ready.
func (hb *Heartbeat) renew(ctx context.Context) error {
	now := hb.now()
	err := hb.write(ctx, now)
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.err = err
	if err == nil {
		hb.renewed = now
	}
	return err
}

func (hb *Heartbeat) write(ctx context.Context, now time.Time) error {
	rctx, cancel := context.WithTimeout(ctx, hb.duration/4)
	defer cancel()
	name := storagev1alpha1.HostLeaseName(hb.node)
	l, err := hb.leases.Get(rctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{storagev1alpha1.LabelNode: hb.node}}}
		hb.fill(l, now, true)
		if _, err := hb.leases.Create(rctx, l, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Lease %s: %w", name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Lease %s: %w", name, err)
	}
	hb.fill(l, now, l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != hb.node)
	if _, err := hb.leases.Update(rctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renew Lease %s: %w", name, err)
	}
	return nil
}

// fill sets the holder, duration and renewal time; acquired marks a new
// holder (the acquire time then moves).
func (hb *Heartbeat) fill(l *coordinationv1.Lease, now time.Time, acquired bool) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[storagev1alpha1.LabelNode] = hb.node
	node, secs, at := hb.node, int32(hb.duration/time.Second), metav1.NewMicroTime(now)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &node, &secs, &at
	if acquired || l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &at
	}
}
