package kubehost_test

// A replica whose backing claim goes Lost (its PV deleted) while its node
// and host stay, replaced with real hosts under continuous writes, and the
// volume controller (the manager) stopped and started again at each step of
// the replacement: after the allocation, once the add is requested, while
// the new replica catches up, after the removal. The catch-up is made long
// enough to restart in (a checkpoint of 4 MiB through the host's 1 MiB/s
// outbound rebuild bound), and the test fails unless that restart came
// while the status said the replacement was rebuilding and the rebuild
// outlasted it. envtest runs no PV
// controller, so the test deletes the PV and sets the claim's phase Lost as
// that controller would.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/replica"
	rclient "github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// replacementStep is an observable point of a replacement at which the
// manager is restarted.
type replacementStep struct {
	name    string
	reached func(rv *storagev1alpha1.ReplicatedVolume, vrs []storagev1alpha1.VolumeReplica) bool
}

// rebuilding is whether the volume's status says its replacement is not
// caught up yet: the coordinator's host reported the add refused while the
// new replica catches up as a non-voter (replica.ErrCatchingUp: the
// rebuild proper), or the replica is a member and still rebuilds.
func rebuilding(rv *storagev1alpha1.ReplicatedVolume) bool {
	c := meta.FindStatusCondition(rv.Status.Conditions, storagev1alpha1.VolumeReplacing.String())
	if c == nil {
		return false
	}
	catchingUp := c.Reason == storagev1alpha1.ReasonAddingReplica.String() && strings.Contains(c.Message, replica.ErrCatchingUp.Error())
	return catchingUp || c.Reason == storagev1alpha1.ReasonRebuildingReplica.String()
}

// addSucceeded is whether a coordinator's host reports the add of the
// replacement of victim committed.
func addSucceeded(vrs []storagev1alpha1.VolumeReplica, victim string) bool {
	for _, r := range vrs {
		if r.Spec.Replaces != victim {
			continue
		}
		for _, vr := range vrs {
			if o := vr.Status.Membership; o != nil && o.Operation == storagev1alpha1.MembershipAdd && o.Member == r.Name &&
				o.Result == storagev1alpha1.MembershipSucceeded {
				return true
			}
		}
	}
	return false
}

// stepRebuild is the name of the restart made while the replacement
// rebuilds.
const stepRebuild = "during the rebuild"

func replacementSteps(victim string) []replacementStep {
	repl := func(vrs []storagev1alpha1.VolumeReplica) *storagev1alpha1.VolumeReplica {
		for i := range vrs {
			if vrs[i].Spec.Replaces == victim {
				return &vrs[i]
			}
		}
		return nil
	}
	requested := func(vrs []storagev1alpha1.VolumeReplica, op storagev1alpha1.MembershipOperation, member string) bool {
		for _, vr := range vrs {
			if m := vr.Spec.Membership; m != nil && m.Operation == op && m.Member.Name == member {
				return true
			}
		}
		return false
	}
	reported := func(vrs []storagev1alpha1.VolumeReplica, op storagev1alpha1.MembershipOperation, member string) bool {
		for _, vr := range vrs {
			if o := vr.Status.Membership; o != nil && o.Operation == op && o.Member == member && o.Result == storagev1alpha1.MembershipSucceeded {
				return true
			}
		}
		return false
	}
	return []replacementStep{
		{"after allocate", func(_ *storagev1alpha1.ReplicatedVolume, vrs []storagev1alpha1.VolumeReplica) bool {
			return repl(vrs) != nil
		}},
		{"after the add is requested", func(_ *storagev1alpha1.ReplicatedVolume, vrs []storagev1alpha1.VolumeReplica) bool {
			r := repl(vrs)
			return r != nil && requested(vrs, storagev1alpha1.MembershipAdd, r.Name)
		}},
		{stepRebuild, func(rv *storagev1alpha1.ReplicatedVolume, vrs []storagev1alpha1.VolumeReplica) bool {
			r := repl(vrs)
			return r != nil && rebuilding(rv)
		}},
		{"after remove", func(_ *storagev1alpha1.ReplicatedVolume, vrs []storagev1alpha1.VolumeReplica) bool {
			return reported(vrs, storagev1alpha1.MembershipRemove, victim)
		}},
	}
}

// loseClaim deletes the PV of vr's backing claim and sets the claim's phase
// Lost, as the PV controller would; vr's node and host stay.
func (fx *fixture) loseClaim(vr storagev1alpha1.VolumeReplica) *corev1.PersistentVolumeClaim {
	fx.t.Helper()
	claim := &corev1.PersistentVolumeClaim{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Spec.BackingClaimName}, claim); err != nil {
		fx.t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, pv); err != nil {
		fx.t.Fatal(err)
	}
	if err := env.Client.Delete(fx.ctx, pv); err != nil {
		fx.t.Fatal(err)
	}
	// envtest runs no PV protection controller: drop kubernetes.io/pv-protection
	// as it would, so the PV is really gone from the API, as on a cluster.
	if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(pv), pv); err == nil && len(pv.Finalizers) > 0 {
		pv.Finalizers = nil
		if err := env.Client.Update(fx.ctx, pv); err != nil && !apierrors.IsNotFound(err) {
			fx.t.Fatal(err)
		}
	}
	poll.Until(fx.t, time.Minute, "the lost PV gone from the API", func() error {
		if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(pv), &corev1.PersistentVolume{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("PV %s: %v", pv.Name, err)
		}
		return nil
	})
	claim.Status.Phase = corev1.ClaimLost
	if err := env.Client.Status().Update(fx.ctx, claim); err != nil {
		fx.t.Fatal(err)
	}
	fx.t.Logf("PV %s of %s's claim %s deleted, the claim Lost; node %s and its host stay", pv.Name, vr.Name, claim.Name, vr.Spec.Node)
	return claim
}

func TestALostClaimIsReplacedUnderWritesAcrossManagerRestarts(t *testing.T) {
	fx := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	fx.ctx = ctx
	// A rebuild long enough to restart the manager in: 4 MiB of data,
	// checkpointed on the coordinator, whose journal then keeps only the last
	// 64 entries, so the replacement rebuilds from that checkpoint through
	// the coordinator's host's outbound rebuild bound of 1 MiB/s (over 3 s).
	rv, led := fx.healthyUnderWrites(ctx, "kh-lost", "khlost", 4, "-trailing-logs", "64", "-rebuild-bandwidth-mib", "1")
	healthy := fx.healthy(rv.Name)
	fx.fill(ctx, rv.Name, 4<<20)
	fx.checkpoint(fx.inRole(rv.Name, storagev1alpha1.RoleCoordinator))

	victim := fx.inRole(rv.Name, storagev1alpha1.RoleFollower)
	claim := fx.loseClaim(victim)
	lostAt := time.Now()

	// Restart the manager once at each step it reaches.
	steps := replacementSteps(victim.Name)
	provisioned, restartedRebuilding, lastReplacing := false, false, ""
	poll.Until(t, 4*time.Minute, "the volume Healthy again, the lost replica gone", func() error {
		vrs := fx.replicas(rv.Name)
		if c := meta.FindStatusCondition(fx.getVolume(rv.Name).Status.Conditions, storagev1alpha1.VolumeReplacing.String()); c != nil && c.Message != lastReplacing {
			lastReplacing = c.Message
			t.Logf("%s: Replacing %s: %s", time.Since(lostAt).Round(time.Millisecond), c.Reason, c.Message)
		}
		for len(steps) > 0 && steps[0].reached(fx.getVolume(rv.Name), vrs) {
			t.Logf("manager restarted %s (%s after the loss)", steps[0].name, time.Since(lostAt).Round(time.Millisecond))
			fx.RestartController()
			if steps[0].name == stepRebuild {
				// The rebuild outlasted the restart: once the manager is
				// back, the coordinator's host (not the manager) still
				// reports no completed add of the replacement, which it
				// completes only once the replacement caught up.
				restartedRebuilding = !addSucceeded(fx.replicas(rv.Name), victim.Name)
				t.Logf("manager back; the replacement's add completed: %t", !restartedRebuilding)
			}
			steps = steps[1:]
		}
		if !provisioned && len(vrs) == 4 {
			fx.ProvisionClaims(rv.Name, 4)
			provisioned = true
		}
		for _, vr := range vrs {
			if vr.Name == victim.Name {
				return fmt.Errorf("%s still exists; Replacing %+v", victim.Name,
					meta.FindStatusCondition(fx.getVolume(rv.Name).Status.Conditions, storagev1alpha1.VolumeReplacing.String()))
			}
		}
		return healthy()
	})
	t.Logf("claim Lost to Healthy: %s; restarts not reached: %d", time.Since(lostAt).Round(time.Second), len(steps))
	time.Sleep(time.Second)
	led.verify(ctx)

	vrs := fx.replicas(rv.Name)
	nodes, ports := map[string]bool{}, map[string]bool{}
	for _, vr := range vrs {
		if nodes[vr.Spec.Node] {
			t.Errorf("two replicas on node %s", vr.Spec.Node)
		}
		nodes[vr.Spec.Node] = true
		p := fmt.Sprintf("%s:%d", vr.Spec.Node, vr.Spec.Port)
		if ports[p] {
			t.Errorf("port %s handed out twice", p)
		}
		ports[p] = true
		if vr.Spec.Replaces != "" && vr.Spec.Replaces != victim.Name {
			t.Errorf("unexpected replacement %s of %s", vr.Name, vr.Spec.Replaces)
		}
	}
	if len(vrs) != 3 || nodes[victim.Spec.Node] {
		t.Errorf("replicas after the replacement: %v, want 3 with none on %s", names(vrs), victim.Spec.Node)
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := env.Client.List(ctx, claims, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, c := range claims.Items {
		if c.DeletionTimestamp == nil {
			live++
		}
		if c.Name == claim.Name && c.DeletionTimestamp == nil {
			t.Errorf("the lost claim %s is not reclaimed", c.Name)
		}
	}
	if live != 3 {
		t.Errorf("%d live backing claims, want 3", live)
	}
	for _, d := range fx.Deletes() {
		if d.UID == "" {
			t.Errorf("%s", d)
		}
	}
	if !restartedRebuilding {
		t.Errorf("the manager was not restarted while the replacement rebuilt (restarts not reached: %d)", len(steps))
	}
	if len(steps) > 0 {
		t.Logf("steps passed before a restart could be made there: %d (the first: %s)", len(steps), steps[0].name)
	}
}

// fill writes size bytes to a new file of the volume through the real
// replica client.
func (fx *fixture) fill(ctx context.Context, volumeName string, size int) {
	fx.t.Helper()
	c := fx.dial(ctx, volumeName)
	defer c.Close()
	f, err := c.Create(ctx, rclient.RootIno, "fill", 0o644, 0, 0)
	if err != nil {
		fx.t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for k := 0; k < size/len(chunk); k++ {
		for i := range chunk {
			chunk[i] = byte(k + i)
		}
		if _, _, err := c.Append(ctx, f.Ino, chunk); err != nil {
			fx.t.Fatalf("fill %s: %v", volumeName, err)
		}
	}
}

// checkpoint asks vr's host, on its admin socket, for a checkpoint of vr.
func (fx *fixture) checkpoint(vr storagev1alpha1.VolumeReplica) {
	fx.t.Helper()
	sock := filepath.Join(fx.Dir, vr.Spec.Node, "host-state", host.AdminSocketName)
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	resp, err := hc.Post(fmt.Sprintf("http://host/v1/workers/%s/%s/checkpoint", vr.Spec.VolumeName, vr.Name), "application/json", nil)
	if err != nil {
		fx.t.Fatalf("checkpoint %s: %v", vr.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(resp.Body)
		fx.t.Fatalf("checkpoint %s: %d %s", vr.Name, resp.StatusCode, b)
	}
}

func names(vrs []storagev1alpha1.VolumeReplica) []string {
	var out []string
	for _, vr := range vrs {
		out = append(out, vr.Name)
	}
	return out
}

// A replacement that never catches up, with real hosts under writes: the
// new replica's backing claim is never provisioned (its node's provisioner
// never answers), so its worker never starts. Past the rebuild timeout the
// controller abandons it: the coordinator's host removes it from the Raft
// configuration, its objects go, and the replacement is made again on the
// fifth node, which is provisioned; the volume is Healthy and every
// acknowledged write reads back.
func TestAReplacementThatNeverCatchesUpIsRemadeElsewhereUnderWrites(t *testing.T) {
	fx := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	fx.ctx = ctx
	fx.RebuildTimeout = 15 * time.Second
	rv, led := fx.healthyUnderWrites(ctx, "kh-stuck", "khstuck", 5)

	victim := fx.inRole(rv.Name, storagev1alpha1.RoleFollower)
	fx.loseClaim(victim)
	var first storagev1alpha1.VolumeReplica
	poll.Until(t, time.Minute, "a first replacement allocated", func() error {
		for _, vr := range fx.replicas(rv.Name) {
			if vr.Spec.Replaces == victim.Name {
				first = vr
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	t.Logf("first replacement %s on %s; its claim is left unprovisioned", first.Name, first.Spec.Node)
	poll.Until(t, time.Minute, "the first replacement abandoned", func() error {
		c := meta.FindStatusCondition(fx.getVolume(rv.Name).Status.Conditions, storagev1alpha1.VolumeReplacing.String())
		if c == nil || c.Reason != storagev1alpha1.ReasonAbandoningReplacement.String() {
			return fmt.Errorf("Replacing %+v", c)
		}
		t.Logf("Replacing: %s", c.Message)
		return nil
	})
	var second storagev1alpha1.VolumeReplica
	poll.Until(t, 2*time.Minute, "the first replacement gone, a second one allocated", func() error {
		second = storagev1alpha1.VolumeReplica{}
		for _, vr := range fx.replicas(rv.Name) {
			if vr.Name == first.Name {
				return fmt.Errorf("%s still exists; Replacing %+v", first.Name,
					meta.FindStatusCondition(fx.getVolume(rv.Name).Status.Conditions, storagev1alpha1.VolumeReplacing.String()))
			}
			if vr.Spec.Replaces == victim.Name {
				second = vr
			}
		}
		if second.Name == "" {
			return fmt.Errorf("no second replacement yet")
		}
		return nil
	})
	if second.Spec.Node == first.Spec.Node || second.Name == first.Name {
		t.Fatalf("second replacement %s on %s, the abandoned one was %s on %s", second.Name, second.Spec.Node, first.Name, first.Spec.Node)
	}
	fx.ProvisionClaim(second.Spec.BackingClaimName)
	poll.Until(t, 3*time.Minute, "the volume Healthy again, the lost replica gone", func() error {
		for _, vr := range fx.replicas(rv.Name) {
			if vr.Name == victim.Name {
				return fmt.Errorf("%s still exists; Replacing %+v", victim.Name,
					meta.FindStatusCondition(fx.getVolume(rv.Name).Status.Conditions, storagev1alpha1.VolumeReplacing.String()))
			}
		}
		return fx.healthy(rv.Name)()
	})
	time.Sleep(time.Second)
	led.verify(ctx)
	poll.Until(t, 30*time.Second, "the coordinator's Raft configuration without the lost and the abandoned replica", func() error {
		for _, vr := range fx.replicas(rv.Name) {
			if vr.Status.Role != storagev1alpha1.RoleCoordinator {
				continue
			}
			for _, m := range vr.Status.Members {
				if m == victim.Name || m == first.Name {
					return fmt.Errorf("coordinator %s reports members %v", vr.Name, vr.Status.Members)
				}
			}
			if len(vr.Status.Members) != 3 {
				return fmt.Errorf("coordinator %s reports members %v", vr.Name, vr.Status.Members)
			}
			return nil
		}
		return fmt.Errorf("no coordinator reported")
	})
	for _, d := range fx.Deletes() {
		if d.UID == "" {
			t.Errorf("%s", d)
		}
	}
}
