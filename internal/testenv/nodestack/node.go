package nodestack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cellfleet/cellfleet/internal/controller/volume"
	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/csi/publication"
	"github.com/cellfleet/cellfleet/internal/csi/server"
)

// Node is one "node" of the stack: its API objects, its real local driver
// and (after StartHosts) its replica-host process.
type Node struct {
	Name string
	// ConsumerRoot is the local driver's --consumer-mount-root, which the
	// host consumes (the same directory: one mount namespace here).
	ConsumerRoot string
	// Socket is the local driver's CSI socket, the host's -local-csi-endpoint.
	Socket string
	// LocalState is the local driver's private state directory (its
	// publication records live beneath it).
	LocalState string
	Driver     *local.Driver
	PodIP      string // set by StartHosts
	Status     string // the host's status listener, set by StartHosts
	Proc       *exec.Cmd
	kubeconfig string // the host's, with a token bound to this node's Pod (StartHosts)

	mu              sync.Mutex
	beforeUnpublish func(*csi.NodeUnpublishVolumeRequest)
}

// AddNode creates a Node labelled for local storage, plays the kubelet
// reporting its NODE Pod's replica-host container ready, and serves the
// node's real local driver (holding its consumer root's publication lock,
// as csi-node does) on a unix socket.
func (s *Stack) AddNode(name string) *Node {
	s.T.Helper()
	n := &Node{Name: name, ConsumerRoot: filepath.Join(s.Dir, name, "consumer"), LocalState: filepath.Join(s.Dir, name, "csi-local")}
	data := filepath.Join(s.Dir, name, "volumes")
	csitest.MkdirAll(s.T, n.ConsumerRoot, n.LocalState, data)
	lock, err := publication.AcquireLock(n.ConsumerRoot, "nodestack "+name)
	if err != nil {
		s.T.Fatal(err)
	}
	s.T.Cleanup(func() { _ = lock.Release() })
	n.Driver, err = local.New(local.Options{NodeID: name, DataRoot: data, StateDir: n.LocalState, ConsumerRoot: n.ConsumerRoot})
	if err != nil {
		s.T.Fatalf("start the local driver of %s: %v", name, err)
	}
	n.Socket = csitest.Serve(s.T, filepath.Join(s.Dir, name, "plugin"), server.Services{
		Identity:   &server.Identity{Name: local.DriverName, Version: "test", Controller: true, Ready: n.Driver.Ready},
		Controller: n.Driver.Controller(), Node: &hookedNode{NodeServer: n.Driver.Node(), n: n},
	})

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{volume.LocalStorageLabel: name}}}
	if err := s.Env.Client.Create(s.Ctx, node); err != nil {
		s.T.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: NodePodName(name), Namespace: s.NS,
			Labels: map[string]string{volume.NodeComponentLabel: volume.NodeComponentValue}},
		Spec: corev1.PodSpec{NodeName: name, ServiceAccountName: NodeServiceAccount, Containers: []corev1.Container{{Name: volume.ReplicaHostContainer, Image: "replica-host"}}},
	}
	if err := s.Env.Client.Create(s.Ctx, p); err != nil {
		s.T.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: volume.ReplicaHostContainer, Ready: true}}
	if err := s.Env.Client.Status().Update(s.Ctx, p); err != nil {
		s.T.Fatal(err)
	}
	// Gone after the test, so a later test's volumes are never placed on a
	// node whose host no longer runs.
	s.T.Cleanup(func() {
		_ = s.Env.Client.Delete(context.Background(), p)
		_ = s.Env.Client.Delete(context.Background(), node)
	})
	s.Nodes = append(s.Nodes, n)
	return n
}

// BeforeUnpublish makes the node's local driver call f on every
// NodeUnpublishVolume before it unpublishes (nil: none).
func (n *Node) BeforeUnpublish(f func(*csi.NodeUnpublishVolumeRequest)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.beforeUnpublish = f
}

// hookedNode is the local driver's Node service with the test's hook in
// front of NodeUnpublishVolume; every other call is the driver's.
type hookedNode struct {
	csi.NodeServer
	n *Node
}

func (h *hookedNode) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	h.n.mu.Lock()
	f := h.n.beforeUnpublish
	h.n.mu.Unlock()
	if f != nil {
		f(req)
	}
	return h.NodeServer.NodeUnpublishVolume(ctx, req)
}

// Publications reads the local driver's durable exclusive-publication
// records from disk, as a restarted driver would find them.
func (n *Node) Publications() ([]publication.Record, error) {
	dir := filepath.Join(n.LocalState, "publications")
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read publication records of %s: %w", n.Name, err)
	}
	var out []publication.Record
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read publication record %s of %s: %w", e.Name(), n.Name, err)
		}
		var r publication.Record
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("publication record %s of %s: %w", e.Name(), n.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) { // an earlier test of the package made it
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
