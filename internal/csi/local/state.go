package local

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/cellfleet/cellfleet/internal/csi/nodereq"
	"github.com/cellfleet/cellfleet/internal/durable"
)

// volume is one provisioned backing volume.
type volume struct {
	ID            string `json:"id"`
	Name          string `json:"name"` // the CreateVolume name, for idempotency
	CapacityBytes int64  `json:"capacityBytes"`
	// Published maps each ordinary target path to its read-only flag.
	Published nodereq.Publications `json:"published,omitempty"`
}

// stateFile is the driver's persistent state: every provisioned volume and
// its ordinary publications. Exclusive publications live in
// publication.Store, written before their mounts.
type stateFile = durable.Table[volume]

func loadState(path string) (*stateFile, error) {
	return durable.LoadTable[volume](path, "local driver state")
}

// volumeByName finds the volume a CreateVolume name made.
func volumeByName(s *stateFile, name string) *volume {
	for _, v := range s.Volumes {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// volumeID derives a stable, path-safe ID from the CreateVolume name, so a
// retried CreateVolume finds the same directory even after a crash between
// mkdir and saving state.
func volumeID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "lv-" + hex.EncodeToString(sum[:16])
}
