package controller

import (
	"errors"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Access modes. A replicated volume is written through one mount session at a
// time (single-writer mounts hold a fencing epoch, docs/fuse.md, "Fencing"),
// so only the single-node modes are served. Kubernetes sends
// SINGLE_NODE_WRITER, or SINGLE_NODE_MULTI_WRITER when the driver advertises
// it (this one does, as its node plugin does), for ReadWriteOnce, and
// SINGLE_NODE_SINGLE_WRITER for ReadWriteOncePod. SINGLE_NODE_READER_ONLY is
// a read-only mount on one node and is honoured by any ReadWriteOnce volume.
// Multi-node modes are refused.

// singleNodeModes are the single-node modes a ReadWriteOnce volume serves.
var singleNodeModes = map[csi.VolumeCapability_AccessMode_Mode]bool{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER:        true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:  true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER: true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:   true,
}

// checkCapability says why a capability cannot be served (nil: it can).
func checkCapability(c *csi.VolumeCapability) error {
	switch {
	case c == nil:
		return errors.New("a volume capability is empty")
	case c.GetBlock() != nil:
		return errors.New("block access is not supported: a replicated volume is a filesystem")
	case c.GetMount() == nil:
		return errors.New("access type must be mount")
	case c.GetMount().GetFsType() != "":
		return fmt.Errorf("fs_type %q is not supported: the filesystem is the replicated FUSE filesystem", c.GetMount().GetFsType())
	case c.GetAccessMode() == nil || c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_UNKNOWN:
		return errors.New("an access mode is required")
	case !singleNodeModes[c.GetAccessMode().GetMode()]:
		return fmt.Errorf("access mode %s is not supported: replicated volumes are ReadWriteOnce or ReadWriteOncePod "+
			"(one writing node, fenced through Raft)", c.GetAccessMode().GetMode())
	}
	return nil
}

// accessModeFor is the access mode to record for the requested
// capabilities: ReadWriteOncePod when every capability is single-writer,
// else ReadWriteOnce (which also serves single-writer publications).
func accessModeFor(caps []*csi.VolumeCapability) (storagev1alpha1.AccessMode, error) {
	if len(caps) == 0 {
		return "", errors.New("volume_capabilities are required")
	}
	mode := storagev1alpha1.AccessReadWriteOncePod
	for _, c := range caps {
		if err := checkCapability(c); err != nil {
			return "", err
		}
		if c.GetAccessMode().GetMode() != csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER {
			mode = storagev1alpha1.AccessReadWriteOnce
		}
	}
	return mode, nil
}

// serves says why a volume of mode cannot serve c (nil: it can): a
// ReadWriteOncePod volume serves only single-writer publications.
func serves(mode storagev1alpha1.AccessMode, c *csi.VolumeCapability) error {
	if err := checkCapability(c); err != nil {
		return err
	}
	if mode == storagev1alpha1.AccessReadWriteOncePod &&
		c.GetAccessMode().GetMode() != csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER {
		return fmt.Errorf("access mode %s is not served by a %s volume: only SINGLE_NODE_SINGLE_WRITER",
			c.GetAccessMode().GetMode(), mode)
	}
	return nil
}
