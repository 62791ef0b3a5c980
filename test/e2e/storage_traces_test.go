package e2e

// What a replica leaves behind. On the API server: its VolumeReplica,
// backing claim, the claim's PersistentVolume, its Service and `<replica>-tls`
// Secret (docs/volume-controller.md, "Objects per volume") and the
// EndpointSlice its host publishes (internal/replica/kubehost/endpoints.go).
// On its node: the local driver's backing directory, named by the PV's CSI
// volume handle under its data root, the driver's state entry and exclusive
// publication record of that handle (internal/csi/local,
// internal/csi/publication), the publication's target directory and mount
// beneath the consumer mount root, and the host's own publication record and
// copy of the replica's credentials (internal/replica/kubehost, published.go
// and credentials.go). A replica retired while its host was gone is released
// without the host; once the host is back it must release what it still
// holds (kubehost/orphans.go), after which the local driver's provisioner can
// delete the PV and its directory: nothing of the replica may remain.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// consumerMountRoot is where the local driver publishes backing volumes for
// the replica host on each node (--consumer-mount-root,
// config/node/daemonset.yaml): one directory per PV name.
const consumerMountRoot = "/var/lib/cellfleet/publication/consumer"

// trace is one thing a replica leaves behind.
type trace struct {
	what string
	// state describes the trace while it is there, "" once it is gone; err
	// when it cannot tell.
	state func() (string, error)
}

// replicaTraces are every trace of one replica on its node.
type replicaTraces struct {
	replica, node string
	traces        []trace
}

// tracesOf lists the traces of replica r, reading its backing claim and PV
// now (they go with the replica).
func (s *volumeScenario) tracesOf(r storagev1alpha1.VolumeReplica) replicaTraces {
	s.t.Helper()
	in := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: storageNamespace, Name: name} }
	var claim corev1.PersistentVolumeClaim
	if err := s.env().Get(s.ctx, in(r.Spec.BackingClaimName), &claim); err != nil || claim.Spec.VolumeName == "" {
		s.t.Fatalf("backing claim %s of %s and its volume: %v (volume %q)", r.Spec.BackingClaimName, r.Name, err, claim.Spec.VolumeName)
	}
	var pv corev1.PersistentVolume
	if err := s.env().Get(s.ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, &pv); err != nil || pv.Spec.CSI == nil {
		s.t.Fatalf("backing volume %s of %s and its CSI volume handle: %v", claim.Spec.VolumeName, r.Name, err)
	}
	node, handle := r.Spec.Node, pv.Spec.CSI.VolumeHandle
	return replicaTraces{replica: r.Name, node: node, traces: []trace{
		s.objectTrace("VolumeReplica", in(r.Name), func() client.Object { return &storagev1alpha1.VolumeReplica{} }),
		s.objectTrace("backing claim", in(claim.Name), func() client.Object { return &corev1.PersistentVolumeClaim{} }),
		s.objectTrace("PersistentVolume", client.ObjectKey{Name: pv.Name}, func() client.Object { return &corev1.PersistentVolume{} }),
		s.objectTrace("Service", in(r.Name), func() client.Object { return &corev1.Service{} }),
		s.objectTrace("EndpointSlice", in(r.Name), func() client.Object { return &discoveryv1.EndpointSlice{} }),
		s.objectTrace("Secret", in(r.Name+"-tls"), func() client.Object { return &corev1.Secret{} }),
		fileTrace("backing directory", nodeStatePath(node, "volumes", handle)),
		localStateTrace(node, handle),
		fileTrace("local driver's publication record", nodeStatePath(node, "csi-local", "publications", handle+".json")),
		fileTrace("publication target", nodeStatePath(node, "publication", "consumer", pv.Name)),
		mountTrace(node, filepath.Join(consumerMountRoot, pv.Name)),
		fileTrace("replica host's publication record", nodeStatePath(node, "replica-host", "publications", pv.Name+".json")),
		fileTrace("replica host's copy of the credentials", nodeStatePath(node, "replica-host", "credentials", r.Name)),
	}}
}

// objectTrace is an API object; newObj gives an empty one to decode into.
func (s *volumeScenario) objectTrace(kind string, key client.ObjectKey, newObj func() client.Object) trace {
	return trace{what: kind + " " + key.Name, state: func() (string, error) {
		obj := newObj()
		err := s.env().Get(s.ctx, key, obj)
		switch {
		case apierrors.IsNotFound(err):
			return "", nil
		case err != nil:
			return "", err
		case obj.GetDeletionTimestamp() != nil:
			return fmt.Sprintf("being deleted, finalizers %v", obj.GetFinalizers()), nil
		}
		if pv, ok := obj.(*corev1.PersistentVolume); ok {
			return fmt.Sprintf("phase %s", pv.Status.Phase), nil
		}
		return "exists", nil
	}}
}

// fileTrace is a file or directory of the node, at path on this host.
func fileTrace(what, path string) trace {
	return trace{what: what + " " + path, state: func() (string, error) {
		_, err := os.Lstat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", nil
		case err != nil:
			return "", err
		}
		return "exists", nil
	}}
}

// mountTrace is a mount point in node's mount namespace.
func mountTrace(node, path string) trace {
	return trace{what: "mount at " + path + " on " + node, state: func() (string, error) {
		points, err := nodeMountPoints(node)
		if err != nil || !points[path] {
			return "", err
		}
		return "mounted", nil
	}}
}

// localStateTrace is the local driver's entry for a volume ID in its state
// file (internal/csi/local, state.go: {"volumes": {ID: ...}}), which only
// DeleteVolume removes.
func localStateTrace(node, volumeID string) trace {
	path := nodeStatePath(node, "csi-local", "local-volumes.json")
	return trace{what: "local driver's state entry " + volumeID + " in " + path, state: func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		var st struct {
			Volumes map[string]json.RawMessage `json:"volumes"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		if _, ok := st.Volumes[volumeID]; !ok {
			return "", nil
		}
		return "listed", nil
	}}
}

// remaining describes every trace still there (or that cannot be judged).
func (rt replicaTraces) remaining() []string {
	var left []string
	for _, tr := range rt.traces {
		switch state, err := tr.state(); {
		case err != nil:
			left = append(left, fmt.Sprintf("%s (cannot tell: %v)", tr.what, err))
		case state != "":
			left = append(left, fmt.Sprintf("%s (%s)", tr.what, state))
		}
	}
	return left
}

// requireTraces fails the scenario unless every trace is there now: each
// is looked for where the product really keeps it, so that its absence
// later proves a removal and not a wrong path.
func (s *volumeScenario) requireTraces(rt replicaTraces) {
	s.t.Helper()
	var missing []string
	for _, tr := range rt.traces {
		switch state, err := tr.state(); {
		case err != nil:
			missing = append(missing, fmt.Sprintf("%s (cannot tell: %v)", tr.what, err))
		case state == "":
			missing = append(missing, tr.what)
		}
	}
	if len(missing) > 0 {
		s.t.Fatalf("test setup: before the fault, %d traces of replica %s on %s are not where the product keeps them, so their removal could not be judged: %s",
			len(missing), rt.replica, rt.node, strings.Join(missing, "; "))
	}
}

// requireTracesGone waits up to within for every trace to be gone and fails
// with the list of those that remain.
func (s *volumeScenario) requireTracesGone(rt replicaTraces, within time.Duration) {
	s.t.Helper()
	var left []string
	waitFor(s.ctx, s.t, within, func() bool {
		left = rt.remaining()
		return len(left) == 0
	}, func() string {
		return fmt.Sprintf("%d of the %d traces of retired replica %s remain after %s returned: %s",
			len(left), len(rt.traces), rt.replica, rt.node, strings.Join(left, "; "))
	})
}
