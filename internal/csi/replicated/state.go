package replicated

import (
	"fmt"
	"sort"

	"github.com/cellfleet/cellfleet/internal/csi/durable"
)

// volume is one staged volume on this node.
type volume struct {
	ID          string          `json:"id"`
	StagingPath string          `json:"stagingPath"`
	ReadOnly    bool            `json:"readOnly,omitempty"`
	Published   map[string]bool `json:"published,omitempty"` // target → read-only
}

type stateFile struct {
	path    string
	Volumes map[string]*volume `json:"volumes"`
}

func loadState(path string) (*stateFile, error) {
	s := &stateFile{path: path}
	if _, err := durable.ReadJSON(path, s); err != nil {
		return nil, fmt.Errorf("replicated driver state: %w", err)
	}
	if s.Volumes == nil {
		s.Volumes = map[string]*volume{}
	}
	return s, nil
}

// save writes the state atomically and durably.
func (s *stateFile) save() error {
	if err := durable.WriteJSON(s.path, s); err != nil {
		return fmt.Errorf("persist replicated driver state: %w", err)
	}
	return nil
}

func (s *stateFile) sortedIDs() []string {
	ids := make([]string, 0, len(s.Volumes))
	for id := range s.Volumes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
