package replicated

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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
	s := &stateFile{path: path, Volumes: map[string]*volume{}}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read replicated driver state: %w", err)
	}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("replicated driver state %s is corrupt: %w", path, err)
	}
	if s.Volumes == nil {
		s.Volumes = map[string]*volume{}
	}
	return s, nil
}

// save writes the state atomically and durably.
func (s *stateFile) save() error {
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode replicated driver state: %w", err)
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("persist replicated driver state: %w", err)
	}
	_, werr := f.Write(raw)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("persist replicated driver state: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("persist replicated driver state: %w", err)
	}
	d, err := os.Open(filepath.Dir(s.path))
	if err != nil {
		return fmt.Errorf("persist replicated driver state: %w", err)
	}
	defer d.Close()
	return d.Sync()
}

func (s *stateFile) sortedIDs() []string {
	ids := make([]string, 0, len(s.Volumes))
	for id := range s.Volumes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
