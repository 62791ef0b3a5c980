// Package local is the local.storage.eric.dev CSI driver: node-local backing
// volumes as directories under a data root, with a Controller service on
// every node that provisions only for its own node's topology (distributed
// provisioning) and a Node service that bind-mounts them.
//
// With a consumer mount root, publishing beneath it is exclusive and durable
// (internal/csi/publication): ordinary publication and DeleteVolume are
// refused with FAILED_PRECONDITION naming the holder until the exclusive
// publication is unpublished.
//
// Capacity is recorded and checked against free space at creation but not
// enforced per directory: see docs/csi.md "Capacity".
//
// Modelled on kubernetes-csi's csi-driver-host-path: one file per service,
// state persisted to a file so a restart loses nothing, every RPC idempotent.
// It must never import the replicated driver.
package local

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
	"github.com/cellfleet/cellfleet/internal/csi/publication"
)

// DriverName is the CSI name of this driver.
const DriverName = "local.storage.eric.dev"

// TopologyKey is the topology segment naming the node a volume lives on.
const TopologyKey = "topology.local.storage.eric.dev/node"

// HolderContextKey is the volume-context key a consumer may set on
// NodePublishVolume beneath the consumer root to name itself as holder.
const HolderContextKey = "local.storage.eric.dev/holder"

// Options configure a Driver.
type Options struct {
	NodeID   string
	DataRoot string // volumes are directories beneath it
	StateDir string // private persistent state of this plugin
	// PathRoots are the roots target paths must lie beneath (kubelet's dir).
	PathRoots []string
	// ConsumerRoot enables exclusive publication beneath it ("" disables).
	ConsumerRoot string
	Log          *slog.Logger
}

// Driver serves the Controller and Node services of the local driver.
type Driver struct {
	opts  Options
	log   *slog.Logger
	roots mountpath.Roots
	pubs  *publication.Store

	mu    sync.Mutex // serialises every mutation of state, as host-path does
	state *stateFile
}

// New loads the driver's persisted state. The caller holds the publication
// lock of ConsumerRoot (cmd/csi-node takes it before calling New).
func New(opts Options) (*Driver, error) {
	if opts.NodeID == "" || opts.DataRoot == "" || opts.StateDir == "" {
		return nil, errors.New("local driver: node ID, data root and state dir are required")
	}
	roots := append([]string(nil), opts.PathRoots...)
	if opts.ConsumerRoot != "" {
		roots = append(roots, opts.ConsumerRoot)
	}
	rs, err := mountpath.NewRoots(roots...)
	if err != nil {
		return nil, fmt.Errorf("local driver: %w", err)
	}
	st, err := loadState(filepath.Join(opts.StateDir, "local-volumes.json"))
	if err != nil {
		return nil, err
	}
	pubs, err := publication.OpenStore(opts.StateDir)
	if err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	return &Driver{opts: opts, log: log.With("driver", DriverName), roots: rs, pubs: pubs, state: st}, nil
}

// Ready reports whether the data root is usable.
func (d *Driver) Ready() error {
	_, err := statfs(d.opts.DataRoot)
	return err
}

// volumeDir is where a volume's data lives.
func (d *Driver) volumeDir(id string) string { return filepath.Join(d.opts.DataRoot, id) }

// exclusive reports whether target lies beneath the consumer mount root.
func (d *Driver) exclusive(target string) bool {
	return d.opts.ConsumerRoot != "" && mountpath.Within(d.opts.ConsumerRoot, target)
}

// topology is this node's accessible topology.
func (d *Driver) topology() map[string]string { return map[string]string{TopologyKey: d.opts.NodeID} }
