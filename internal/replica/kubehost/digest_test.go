package kubehost_test

// State digests with real hosts: three replica-host processes publish
// their workers' digests in the VolumeReplica status once writes stop, the
// volume controller compares them; a replica whose backing file is changed
// on disk is reported diverged, and what a restart does with such a change
// is asserted as it really happens.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	rclient "github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/testenv/nodestack"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// agreedDigest waits until every replica of the volume published the same
// digest at one index (and, if minIndex > 0, at least at minIndex) and
// returns it.
func (fx *fixture) agreedDigest(volumeName string, minIndex int64, timeout time.Duration) storagev1alpha1.StateDigest {
	fx.t.Helper()
	var got storagev1alpha1.StateDigest
	poll.Until(fx.t, timeout, "every replica publishing the same state digest at one index", func() error {
		vrs := fx.replicas(volumeName)
		if len(vrs) != hosts {
			return fmt.Errorf("%d replicas", len(vrs))
		}
		var first *storagev1alpha1.StateDigest
		for _, vr := range vrs {
			d := vr.Status.Digest
			switch {
			case d == nil:
				return fmt.Errorf("replica %s has published no digest", vr.Name)
			case d.Index < minIndex:
				return fmt.Errorf("replica %s published index %d, want at least %d", vr.Name, d.Index, minIndex)
			case first == nil:
				first = d
			case d.Index != first.Index || d.Value != first.Value:
				return fmt.Errorf("replica %s published %d/%s, another %d/%s", vr.Name, d.Index, d.Value, first.Index, first.Value)
			}
		}
		got = *first
		return nil
	})
	return got
}

// diverged waits for the volume's Diverged condition to have status and
// reason and returns it.
func (fx *fixture) divergedIs(volumeName string, status metav1.ConditionStatus, reason storagev1alpha1.ConditionReason, timeout time.Duration) (*metav1.Condition, *storagev1alpha1.ReplicatedVolume) {
	fx.t.Helper()
	var c *metav1.Condition
	var rv *storagev1alpha1.ReplicatedVolume
	poll.Until(fx.t, timeout, fmt.Sprintf("the volume's Diverged %s/%s", status, reason), func() error {
		rv = fx.getVolume(volumeName)
		c = meta.FindStatusCondition(rv.Status.Conditions, storagev1alpha1.VolumeDiverged.String())
		if c == nil || c.Status != status || c.Reason != reason.String() {
			return fmt.Errorf("Diverged %+v", c)
		}
		return nil
	})
	return c, rv
}

// backingFile finds the backing file of inode ino beneath a node's
// consumer root (the published backing volume holds the worker's tree).
func backingFile(t *testing.T, n *nodestack.Node, ino uint64) string {
	t.Helper()
	// The file's first chunk in the replica's chunk store:
	// store/chunks/<ino>/0.<version> (internal/replica/chunkstore).
	dir := filepath.Join("store", "chunks", strconv.FormatUint(ino, 16))
	var found string
	err := filepath.WalkDir(n.ConsumerRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(filepath.Dir(p), string(filepath.Separator)+dir) && strings.HasPrefix(d.Name(), "0.") {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	if err != nil || found == "" {
		t.Fatalf("no first chunk of inode %d (%s/0.*) beneath %s: %v", ino, dir, n.ConsumerRoot, err)
	}
	return found
}

// flipByte changes one byte of a file in place, as bit rot or a stray
// writer on the backing disk would.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func (fx *fixture) requestDigest(vr *storagev1alpha1.VolumeReplica, value string) {
	fx.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, storagev1alpha1.AnnotationDigestRequested, value)
	if err := env.Client.Patch(fx.ctx, vr, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		fx.t.Fatal(err)
	}
}

func TestReplicasPublishDigestsAndADivergedReplicaIsReported(t *testing.T) {
	fx := newFixture(t)
	for i := range hosts {
		fx.AddNode(fmt.Sprintf("kh-dig-%c", 'a'+i))
	}
	fx.StartControllerOnFreePorts()
	fx.StartHosts("-digest-quiet-period", "1s", "-digest-interval", "2s")
	rv := fx.volume("khdig", hosts)
	fx.ProvisionClaims(rv.Name, hosts)
	poll.Until(t, 2*time.Minute, "the volume Healthy", func() error {
		if r := fx.getVolume(rv.Name).Status.Robustness; r != storagev1alpha1.RobustnessHealthy {
			return fmt.Errorf("robustness %q", r)
		}
		return nil
	})

	// Writes, then quiet.
	cfg, err := fx.clientConfig(rv.Name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rclient.Dial(fx.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.Create(fx.ctx, rclient.RootIno, "records", 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	const records, size = 200, 256
	for k := range records {
		rec := []byte(fmt.Sprintf("%0*d", size, k))
		if _, err := c.Write(fx.ctx, f.Ino, uint64(k*size), rec); err != nil {
			t.Fatalf("write %d not acknowledged: %v", k, err)
		}
	}
	var applied int64
	for _, vr := range fx.replicas(rv.Name) {
		if vr.Status.Role == storagev1alpha1.RoleCoordinator {
			applied = vr.Status.AppliedIndex
		}
	}
	// The coordinator's applied index after the writes bounds the command
	// index from below only loosely (its report may be a pass old), so the
	// digest must be at least some way past the writes' start.
	agreed := fx.agreedDigest(rv.Name, applied-int64(records), time.Minute)
	t.Logf("all three replicas published digest %s at index %d", agreed.Value[:12], agreed.Index)
	cond, _ := fx.divergedIs(rv.Name, metav1.ConditionFalse, storagev1alpha1.ReasonDigestsAgree, 30*time.Second)
	if !strings.Contains(cond.Message, fmt.Sprintf("index %d", agreed.Index)) {
		t.Errorf("DigestsAgree message %q does not name index %d", cond.Message, agreed.Index)
	}

	// A follower's backing file changed under the running worker: the
	// engine reads it for the digest and does not verify it otherwise, so
	// only the comparison finds it. Its host digests again on request.
	var victim storagev1alpha1.VolumeReplica
	for _, vr := range fx.replicas(rv.Name) {
		if vr.Status.Role == storagev1alpha1.RoleFollower {
			victim = vr
			break
		}
	}
	node := fx.NodeNamed(victim.Spec.Node)
	path := backingFile(t, node, f.Ino)
	flipByte(t, path, 10)
	fx.requestDigest(&victim, "after-live-change")
	poll.Until(t, 30*time.Second, "the follower answering the digest request", func() error {
		for _, vr := range fx.replicas(rv.Name) {
			if vr.Name == victim.Name {
				if d := vr.Status.Digest; d == nil || d.Request != "after-live-change" {
					return fmt.Errorf("digest %+v", d)
				}
			}
		}
		return nil
	})
	cond, cur := fx.divergedIs(rv.Name, metav1.ConditionTrue, storagev1alpha1.ReasonDigestMismatch, 30*time.Second)
	for _, s := range []string{victim.Name, fmt.Sprintf("index %d", agreed.Index), agreed.Value[:12]} {
		if !strings.Contains(cond.Message, s) {
			t.Errorf("DigestMismatch message %q does not name %q", cond.Message, s)
		}
	}
	if cur.Status.Robustness != storagev1alpha1.RobustnessDegraded {
		t.Errorf("robustness %q while a replica diverges, want Degraded", cur.Status.Robustness)
	}
	t.Logf("volume reports: %s", cond.Message)

	// The same replica's host stopped, its chunk changed again on disk, the
	// host restarted: a chunk no kept checkpoint names is not an authority
	// (fsm.New empties the chunk store's live state, collecting it, and the
	// journal is replayed), so the change is gone and its first digest in
	// the new process agrees with the others again.
	fx.StopHost(node)
	flipByte(t, path, 20)
	fx.RestartHost(node)
	poll.Until(t, time.Minute, "the restarted replica Ready with a digest taken by its new process", func() error {
		for _, vr := range fx.replicas(rv.Name) {
			if vr.Name != victim.Name {
				continue
			}
			if lost := meta.FindStatusCondition(vr.Status.Conditions, storagev1alpha1.ReplicaStateLost.String()); lost != nil && lost.Status == metav1.ConditionTrue {
				return errors.New("replica reports ReplicaStateLost: " + lost.Message)
			}
			if d := vr.Status.Digest; d == nil || d.Request != "" {
				return fmt.Errorf("digest %+v still the one answering the request", d)
			}
		}
		return nil
	})
	again := fx.agreedDigest(rv.Name, agreed.Index, time.Minute)
	if again.Index != agreed.Index || again.Value != agreed.Value {
		t.Errorf("after the restart the replicas agree on %d/%s, want the digest before the change %d/%s", again.Index, again.Value, agreed.Index, agreed.Value)
	}
	fx.divergedIs(rv.Name, metav1.ConditionFalse, storagev1alpha1.ReasonDigestsAgree, 30*time.Second)
	poll.Until(t, 30*time.Second, "the volume Healthy again", func() error {
		if r := fx.getVolume(rv.Name).Status.Robustness; r != storagev1alpha1.RobustnessHealthy {
			return fmt.Errorf("robustness %q", r)
		}
		return nil
	})
}
