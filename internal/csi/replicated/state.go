package replicated

import (
	"github.com/cellfleet/cellfleet/internal/csi/nodereq"
	"github.com/cellfleet/cellfleet/internal/durable"
)

// volume is one staged volume on this node.
type volume struct {
	ID          string               `json:"id"`
	StagingPath string               `json:"stagingPath"`
	ReadOnly    bool                 `json:"readOnly,omitempty"`
	Published   nodereq.Publications `json:"published,omitempty"` // target → read-only
}

// stateFile is the node's durable record of staged volumes.
type stateFile = durable.Table[volume]

func loadState(path string) (*stateFile, error) {
	return durable.LoadTable[volume](path, "replicated driver state")
}
