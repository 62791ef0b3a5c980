package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// history is the host's own record of which replicas it initialised, kept
// on host storage apart from the replicas' data directories, so that a
// wiped data directory is recognised as loss rather than a new replica.
type history struct{ dir string }

type historyRecord struct {
	Volume     string `json:"volume"`
	Replica    string `json:"replica"`
	Generation uint64 `json:"generation"`
}

func (h history) path(volume, replica string) string {
	return filepath.Join(h.dir, "initialised", volume, replica+".json")
}

// recorded reports whether this generation of the replica was initialised.
func (h history) recorded(volume, replica string, generation uint64) (bool, error) {
	b, err := os.ReadFile(h.path(volume, replica))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read host history: %w", err)
	}
	var r historyRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return false, fmt.Errorf("host history of %s/%s is corrupt: %w", volume, replica, err)
	}
	return r.Generation >= generation, nil
}

func (h history) record(volume, replica string, generation uint64) error {
	p := h.path(volume, replica)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("record host history: %w", err)
	}
	b, _ := json.Marshal(historyRecord{Volume: volume, Replica: replica, Generation: generation})
	tmp := p + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("record host history: %w", err)
	}
	_, err = fh.Write(b)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("record host history: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("record host history: %w", err)
	}
	return syncDir(filepath.Dir(p))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
