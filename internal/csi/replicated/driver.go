// Package replicated is the node side of the replicated.storage.eric.dev
// CSI driver: NodeStageVolume asks the FUSE mount owner (over its unix
// socket, see owner.go and docs/csi.md) to mount the volume at the staging
// path; NodePublishVolume bind-mounts that into the Pod's target.
//
// The plugin holds no FUSE session itself, so killing or upgrading it
// leaves running mounts intact; its own state (what is staged and
// published where) is a file rebuilt on start. A staging mount whose owner
// died answers ENOTCONN: it is reported INACCESSIBLE by NodeGetVolumeHealth
// and detached by NodeUnstageVolume.
//
// It owns the Node service and the plugin's side of the mount-owner
// protocol; it must never import internal/fuse or internal/mountowner (the
// owner's implementation; only its api package) or the local driver.
package replicated

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
)

// DriverName is the CSI name of this driver.
const DriverName = "replicated.storage.eric.dev"

// Options configure a Driver.
type Options struct {
	NodeID     string
	StateDir   string
	PathRoots  []string // staging and target paths must lie beneath them
	MountOwner MountOwner
	Log        *slog.Logger
}

// Driver serves the replicated driver's Node service.
type Driver struct {
	opts  Options
	log   *slog.Logger
	roots mountpath.Roots
	owner MountOwner

	mu    sync.Mutex
	state *stateFile
}

// New loads the plugin's state and compares it with the mount table, so a
// restarted plugin knows every staging and publication it made.
func New(opts Options) (*Driver, error) {
	if opts.NodeID == "" || opts.StateDir == "" || opts.MountOwner == nil {
		return nil, errors.New("replicated driver: node ID, state dir and mount owner are required")
	}
	rs, err := mountpath.NewRoots(opts.PathRoots...)
	if err != nil {
		return nil, fmt.Errorf("replicated driver: %w", err)
	}
	st, err := loadState(filepath.Join(opts.StateDir, "replicated-volumes.json"))
	if err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	d := &Driver{opts: opts, log: log.With("driver", DriverName), roots: rs, owner: opts.MountOwner, state: st}
	d.reportRecovered()
	return d, nil
}

// reportRecovered logs what the state file says survives, and whether the
// mount table agrees; it changes nothing (unstage cleans).
func (d *Driver) reportRecovered() {
	for _, id := range d.state.SortedIDs() {
		v := d.state.Volumes[id]
		mounted, err := mountpath.IsMountPoint(mountpath.SelfMountInfo, v.StagingPath)
		d.log.Info("replicated: recovered staged volume", "volume", id, "staging", v.StagingPath,
			"mounted", mounted, "publications", len(v.Published), "err", err)
	}
}

// Ready: the plugin can serve; the owner's health is per volume.
func (d *Driver) Ready() error { return nil }
