package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// StandaloneFile is the configuration of a host run with no Kubernetes.
type StandaloneFile struct {
	StateDir     string       `json:"stateDir"`
	StatusListen string       `json:"statusListen"`
	Workers      []WorkerSpec `json:"workers"`
}

// LoadStandalone reads and validates a standalone configuration file.
func LoadStandalone(path string) (StandaloneFile, error) {
	var f StandaloneFile
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("read standalone config: %w", err)
	}
	dec := json.NewDecoder(bytesReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("parse standalone config %s: %w", path, err)
	}
	var errs []error
	if f.StateDir == "" {
		errs = append(errs, errors.New("stateDir is required"))
	}
	if f.StatusListen == "" {
		errs = append(errs, errors.New("statusListen is required"))
	}
	seen := map[string]bool{}
	for _, w := range f.Workers {
		if err := w.Validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[w.Key()] {
			errs = append(errs, fmt.Errorf("worker %s listed twice", w.Key()))
		}
		seen[w.Key()] = true
	}
	if err := errors.Join(errs...); err != nil {
		return f, fmt.Errorf("standalone config %s: %w", path, err)
	}
	return f, nil
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
