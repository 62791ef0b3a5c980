package kubehost_test

// Replacement with real hosts: under continuous writes through the real
// replica client, one replica's host is killed (SIGKILL), so it renews its
// Lease no more (10s here; its NODE Pod object is deleted too, as the
// node's eviction would); once the Lease expired, after the replacement
// delay (1 minute: the flag's minimum) the volume
// controller allocates a replica on the fourth node, the coordinator's host
// adds it through Raft, it rebuilds, the lost member is removed and its
// objects go without a release acknowledgement. Every acknowledged write is
// read back afterwards.

import (
	"context"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	rclient "github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// clientConfig builds the replica client's configuration from the volume's
// mount Secret and its replicas' EndpointSlices.
func (fx *fixture) clientConfig(volumeName string) (rclient.Config, error) {
	s := &corev1.Secret{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: volumeName + "-mount"}, s); err != nil {
		return rclient.Config{}, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.Data[storagev1alpha1.SecretKeyCACert]) {
		return rclient.Config{}, fmt.Errorf("mount secret of %s has no CA certificate", volumeName)
	}
	cfg := rclient.Config{Volume: volumeName, RootCAs: pool, Token: string(s.Data[storagev1alpha1.SecretKeyMountToken]),
		AttemptTimeout: 3 * time.Second, RetryBudget: 10 * time.Second}
	for _, vr := range fx.replicas(volumeName) {
		sl := &discoveryv1.EndpointSlice{}
		if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Name}, sl); err != nil || len(sl.Endpoints) == 0 {
			continue
		}
		cfg.Endpoints = append(cfg.Endpoints, rclient.Endpoint{ID: vr.Name,
			Address:    net.JoinHostPort(sl.Endpoints[0].Addresses[0], strconv.Itoa(int(vr.Spec.Port))),
			ServerName: vr.Name + "." + fx.ns + ".svc"})
	}
	return cfg, nil
}

// dial connects the real replica client to the volume's current replicas.
func (fx *fixture) dial(ctx context.Context, volumeName string) *rclient.Client {
	fx.t.Helper()
	cfg, err := fx.clientConfig(volumeName)
	if err != nil {
		fx.t.Fatal(err)
	}
	c, err := rclient.Dial(ctx, cfg)
	if err != nil {
		fx.t.Fatal(err)
	}
	return c
}

func (fx *fixture) getVolume(name string) *storagev1alpha1.ReplicatedVolume {
	fx.t.Helper()
	rv := &storagev1alpha1.ReplicatedVolume{}
	if err := env.Client.Get(fx.ctx, client.ObjectKey{Name: name}, rv); err != nil {
		fx.t.Fatal(err)
	}
	return rv
}

// ledger is the acknowledged writes of a writer running through the real
// replica client: record k holds value v at offset 8k.
type ledger struct {
	fx     *fixture
	volume string
	ino    uint64
	mu     sync.Mutex
	acks   map[uint64]uint64
	// failures counts the dials and writes that failed (and were tried
	// again): a replacement expects some, a rotation none.
	failures atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
}

// startWrites creates a file on the volume and writes to it continuously
// until verify; only acknowledged writes enter the ledger. A writer that
// loses its coordinator dials the volume's current replicas again.
func (fx *fixture) startWrites(ctx context.Context, volumeName string) *ledger {
	fx.t.Helper()
	c := fx.dial(ctx, volumeName)
	f, err := c.Create(ctx, rclient.RootIno, "ledger", 0o644, 0, 0)
	if err != nil {
		fx.t.Fatal(err)
	}
	c.Close()
	led := &ledger{fx: fx, volume: volumeName, ino: f.Ino, acks: map[uint64]uint64{}, stop: make(chan struct{})}
	led.wg.Add(1)
	go func() {
		defer led.wg.Done()
		var cl *rclient.Client
		defer func() {
			if cl != nil {
				cl.Close()
			}
		}()
		for k := uint64(0); ; k++ {
			select {
			case <-led.stop:
				return
			default:
			}
			if cl == nil {
				cfg, err := fx.clientConfig(volumeName)
				if err == nil {
					cl, err = rclient.Dial(ctx, cfg)
				}
				if err != nil {
					led.failures.Add(1)
					cl = nil
					time.Sleep(200 * time.Millisecond)
					continue
				}
			}
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], k+1)
			slot := k % 4096
			if _, err := cl.Write(ctx, led.ino, slot*8, b[:]); err != nil {
				led.failures.Add(1)
				cl.Close()
				cl = nil // the coordinator may have moved to the new replica: dial the current set
				continue
			}
			led.mu.Lock()
			led.acks[slot] = k + 1
			led.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return led
}

// verify stops the writer and reads every acknowledged slot back from the
// volume's current replicas.
func (led *ledger) verify(ctx context.Context) {
	t := led.fx.t
	t.Helper()
	close(led.stop)
	led.wg.Wait()
	c := led.fx.dial(ctx, led.volume)
	defer c.Close()
	led.mu.Lock()
	defer led.mu.Unlock()
	if len(led.acks) == 0 {
		t.Fatal("no write was acknowledged")
	}
	for slot, v := range led.acks {
		got, err := c.Read(ctx, led.ino, slot*8, 8)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 8 || binary.LittleEndian.Uint64(got) < v {
			t.Fatalf("slot %d: read %x, acknowledged value %d lost", slot, got, v)
		}
	}
	t.Logf("%d acknowledged slots read back intact", len(led.acks))
}

// healthyUnderWrites starts nodes nodes named nodePrefix-a, -b..., the
// controller (with the options the test set on fx) and their hosts (with
// hostArgs), makes a 3-replica volume, waits until it is Healthy and starts
// writing to it: the start every replacement test shares.
func (fx *fixture) healthyUnderWrites(ctx context.Context, nodePrefix, volume string, nodes int, hostArgs ...string) (*storagev1alpha1.ReplicatedVolume, *ledger) {
	fx.t.Helper()
	for i := range nodes {
		fx.AddNode(fmt.Sprintf("%s-%c", nodePrefix, 'a'+i))
	}
	fx.StartControllerOnFreePorts()
	fx.StartHosts(hostArgs...)
	rv := fx.volume(volume, 3)
	fx.ProvisionClaims(rv.Name, 3)
	poll.Until(fx.t, 2*time.Minute, "the volume Healthy", fx.healthy(rv.Name))
	led := fx.startWrites(ctx, rv.Name)
	time.Sleep(2 * time.Second)
	return rv, led
}

// healthy is a condition for eventually: the volume's robustness is Healthy.
func (fx *fixture) healthy(volumeName string) func() error {
	return func() error {
		if r := fx.getVolume(volumeName).Status.Robustness; r != storagev1alpha1.RobustnessHealthy {
			return fmt.Errorf("robustness %q", r)
		}
		return nil
	}
}

// inRole is a replica of the volume that reports role.
func (fx *fixture) inRole(volumeName string, role storagev1alpha1.ReplicaRole) storagev1alpha1.VolumeReplica {
	fx.t.Helper()
	for _, vr := range fx.replicas(volumeName) {
		if vr.Status.Role == role {
			return vr
		}
	}
	fx.t.Fatalf("volume %s has no replica in role %s", volumeName, role)
	return storagev1alpha1.VolumeReplica{}
}

func TestAGoneNodesReplicaIsReplacedUnderWrites(t *testing.T) {
	fx := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	fx.ctx = ctx
	fx.ReplacementDelay = time.Minute
	rv, led := fx.healthyUnderWrites(ctx, "kh-rep", "khrep", 4, "-lease-duration", "10s")
	healthy := fx.healthy(rv.Name)

	// Kill a follower's host and declare its node gone.
	victim := fx.inRole(rv.Name, storagev1alpha1.RoleFollower)
	for _, n := range fx.Nodes {
		if n.Name == victim.Spec.Node {
			if err := n.Proc.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fx.ns, Name: "node-" + victim.Spec.Node}}); err != nil {
		t.Fatal(err)
	}
	declared := time.Now()
	t.Logf("host of %s on node %s killed and the node declared gone", victim.Name, victim.Spec.Node)

	poll.Until(t, 90*time.Second, "the volume Degraded", func() error {
		if r := fx.getVolume(rv.Name).Status.Robustness; r != storagev1alpha1.RobustnessDegraded {
			return fmt.Errorf("robustness %q", r)
		}
		return nil
	})
	poll.Until(t, 2*time.Minute, "a replacement allocated", func() error {
		for _, vr := range fx.replicas(rv.Name) {
			if vr.Spec.Replaces == victim.Name {
				return nil
			}
		}
		return fmt.Errorf("none yet; Replacing %+v", meta.FindStatusCondition(fx.getVolume(rv.Name).Status.Conditions, storagev1alpha1.VolumeReplacing.String()))
	})
	fx.ProvisionClaims(rv.Name, 4)
	poll.Until(t, 3*time.Minute, "the volume Healthy again, the lost replica gone", func() error {
		for _, vr := range fx.replicas(rv.Name) {
			if vr.Name == victim.Name {
				return fmt.Errorf("%s still exists; Replacing %+v", victim.Name,
					meta.FindStatusCondition(fx.getVolume(rv.Name).Status.Conditions, storagev1alpha1.VolumeReplacing.String()))
			}
		}
		return healthy()
	})
	took := time.Since(declared)
	t.Logf("node declared gone to Healthy: %s (replacement delay %s)", took.Round(time.Second), fx.ReplacementDelay)
	time.Sleep(time.Second)
	led.verify(ctx)
	members := map[string]bool{}
	for _, vr := range fx.replicas(rv.Name) {
		members[vr.Name] = true
		if vr.Spec.Node == victim.Spec.Node {
			t.Errorf("replica %s still on the gone node", vr.Name)
		}
	}
	if len(members) != 3 {
		t.Errorf("%d replicas after the replacement, want 3: %v", len(members), members)
	}
	// The Raft configuration itself changed: the coordinator reports the
	// three remaining replicas as its members, the lost one not among them.
	poll.Until(t, 30*time.Second, "the coordinator's Raft configuration without the lost replica", func() error {
		for _, vr := range fx.replicas(rv.Name) {
			if vr.Status.Role != storagev1alpha1.RoleCoordinator {
				continue
			}
			got := map[string]bool{}
			for _, m := range vr.Status.Members {
				got[m] = true
			}
			if len(got) != 3 || got[victim.Name] {
				return fmt.Errorf("coordinator %s reports members %v", vr.Name, vr.Status.Members)
			}
			for name := range members {
				if !got[name] {
					return fmt.Errorf("coordinator %s reports members %v, want %v", vr.Name, vr.Status.Members, members)
				}
			}
			return nil
		}
		return fmt.Errorf("no coordinator reported")
	})
}
