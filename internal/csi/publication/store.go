package publication

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// Record is the durable claim of one exclusive publication.
type Record struct {
	VolumeID   string    `json:"volumeID"`
	TargetPath string    `json:"targetPath"`
	Holder     string    `json:"holder"`
	ReadOnly   bool      `json:"readOnly"`
	Node       string    `json:"node"`
	CreatedAt  time.Time `json:"createdAt"`
}

// String names the holder the way refusals quote it.
func (r Record) String() string {
	return fmt.Sprintf("holder %q at %s", r.Holder, r.TargetPath)
}

// validID bounds the volume IDs used as record file names.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// recordsDir is the directory, under the plugin's state dir, of the records.
const recordsDir = "publications"

// Store is the set of records, kept on disk under a state directory and
// cached in memory. It is safe for concurrent use.
type Store struct {
	dir     string
	mu      sync.Mutex
	records map[string]Record
}

// OpenStore loads every record under stateDir. A record that does not
// parse is an error, never skipped: skipping would silently free a volume
// that a holder still uses.
func OpenStore(stateDir string) (*Store, error) {
	dir := filepath.Join(stateDir, recordsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create publication records dir: %w", err)
	}
	// The records directory's own entry must be durable before a record in
	// it is acknowledged, or a power cut loses every record at once.
	if err := durable.SyncDir(stateDir); err != nil {
		return nil, fmt.Errorf("create publication records dir: %w", err)
	}
	s := &Store{dir: dir, records: map[string]Record{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read publication records: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			// An interrupted Put never renamed: the mount was not made.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("remove interrupted record %s: %w", name, err)
			}
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read record %s: %w", name, err)
		}
		var r Record
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("publication record %s is corrupt (refusing to forget it): %w", name, err)
		}
		s.records[r.VolumeID] = r
	}
	return s, nil
}

// Get returns the record of a volume, if any.
func (s *Store) Get(volumeID string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[volumeID]
	return r, ok
}

// List returns every record, ordered by volume ID.
func (s *Store) List() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Record, 0, len(s.records))
	for _, r := range s.records {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VolumeID < out[j].VolumeID })
	return out
}

// Put writes r durably: temp file, fsync, rename, fsync of the directory.
// When Put returns nil the record survives a crash or power loss.
func (s *Store) Put(r Record) error {
	if !validID.MatchString(r.VolumeID) {
		return fmt.Errorf("publication record: invalid volume ID %q", r.VolumeID)
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode record of %s: %w", r.VolumeID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	final := filepath.Join(s.dir, r.VolumeID+".json")
	if err := durable.WriteFile(final, raw); err != nil {
		return fmt.Errorf("record publication of %s: %w", r.VolumeID, err)
	}
	s.records[r.VolumeID] = r
	return nil
}

// Delete removes a volume's record durably; absent records are fine.
func (s *Store) Delete(volumeID string) error {
	if !validID.MatchString(volumeID) {
		return fmt.Errorf("publication record: invalid volume ID %q", volumeID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := durable.RemoveFile(filepath.Join(s.dir, volumeID+".json")); err != nil {
		return fmt.Errorf("publication record of %s: %w", volumeID, err)
	}
	delete(s.records, volumeID)
	return nil
}
