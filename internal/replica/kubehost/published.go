package kubehost

// The host's own record of each publication it asked for: the host keeps the
// claim, PV and node identity on persistent host storage
// (docs/replica-engine.md, "Identity, loss and recovery" and "Kubernetes
// mode"). The local driver's volume ID
// is read from the PersistentVolume at publication; a PV deleted while its
// replica runs (a lost backing volume, which the volume controller replaces)
// takes that ID with it, and without a copy the host could never ask for the
// unpublication, so it would never acknowledge the release and the lost
// replica would never be retired. The record is written durably before
// NodePublishVolume, so a publication never exists without it, and removed
// only after NodeUnpublishVolume succeeded.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// publishedDir is the directory, beneath the host's state dir, of the
// publication records: one <PV name>.json each.
const publishedDir = "publications"

// publishedVolume is one publication the host asked the local driver for.
type publishedVolume struct {
	PV       string `json:"pv"`
	VolumeID string `json:"volumeID"`
	Replica  string `json:"replica"`
	// ReplicaUID tells a replica of the same name made later from the one
	// that published (orphans.go); empty in records written before it.
	ReplicaUID string `json:"replicaUID,omitempty"`
}

// publishedPath is the record of PV pv. PV names are DNS subdomains; anything
// else (a path separator, say) is refused rather than written.
func (a *Agent) publishedPath(pv string) (string, error) {
	if errs := validation.IsDNS1123Subdomain(pv); len(errs) > 0 {
		return "", fmt.Errorf("backing volume name %q: %v", pv, errs)
	}
	return filepath.Join(a.opts.StateDir, publishedDir, pv+".json"), nil
}

// rememberPublication durably records rec before its publication is asked for.
func (a *Agent) rememberPublication(rec publishedVolume) error {
	path, err := a.publishedPath(rec.PV)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create the host's publication records: %w", err)
		}
		// The directory's own entry must be durable before a record in it.
		if err := durable.SyncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("create the host's publication records: %w", err)
		}
	}
	if err := durable.WriteJSON(path, rec); err != nil {
		return fmt.Errorf("record the publication of %s (volume %s): %w", rec.PV, rec.VolumeID, err)
	}
	return nil
}

// recalledPublication returns the record of pv, found=false when the host
// never asked to publish it (or already unpublished it).
func (a *Agent) recalledPublication(pv string) (rec publishedVolume, found bool, err error) {
	path, err := a.publishedPath(pv)
	if err != nil {
		return rec, false, err
	}
	found, err = durable.ReadJSON(path, &rec)
	if err != nil {
		return rec, found, fmt.Errorf("the host's publication record of %s: %w", pv, err)
	}
	return rec, found, nil
}

// forgetPublication removes pv's record once its unpublication succeeded.
func (a *Agent) forgetPublication(pv string) error {
	path, err := a.publishedPath(pv)
	if err != nil {
		return err
	}
	if err := durable.RemoveFile(path); err != nil {
		return fmt.Errorf("remove the host's publication record of %s: %w", pv, err)
	}
	return nil
}

// recordedPublications reads every publication record (orphans.go). A
// record that does not decode is an error, never skipped: its volume might
// still be published.
func (a *Agent) recordedPublications() ([]publishedVolume, error) {
	dir := filepath.Join(a.opts.StateDir, publishedDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the host's publication records: %w", err)
	}
	var out []publishedVolume
	var errs []error
	for _, e := range entries {
		pv, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue // a write in progress (durable.TempSuffix) or not ours
		}
		rec, found, err := a.recalledPublication(pv)
		switch {
		case err != nil:
			errs = append(errs, err)
		case found:
			out = append(out, rec)
		}
	}
	return out, errors.Join(errs...)
}
