package local

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// singleNodeModes are the access modes a node-local directory can honour:
// it is reachable from one node only.
var singleNodeModes = map[csi.VolumeCapability_AccessMode_Mode]bool{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER:        true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:   true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER: true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:  true,
}

// checkCapability says why a capability is unsupported (nil: supported).
// Only filesystem (mount) access is served: volumes are directories.
func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return fmt.Errorf("volume capability is missing")
	}
	if c.GetBlock() != nil {
		return fmt.Errorf("block access is not supported: volumes are directories")
	}
	if c.GetMount() == nil {
		return fmt.Errorf("access type must be mount")
	}
	if fs := c.GetMount().GetFsType(); fs != "" {
		return fmt.Errorf("fs_type %q is not supported: volumes are directories of the data root's filesystem", fs)
	}
	if c.GetAccessMode() == nil || !singleNodeModes[c.GetAccessMode().GetMode()] {
		return fmt.Errorf("access mode %v is not supported: volumes are node-local", c.GetAccessMode().GetMode())
	}
	return nil
}

func checkCapabilities(cs []*csi.VolumeCapability) error {
	if len(cs) == 0 {
		return fmt.Errorf("volume capabilities are missing")
	}
	for _, c := range cs {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}
