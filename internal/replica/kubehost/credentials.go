package kubehost

// Credentials: a replica's Secret (`<replica>-tls`, written by the volume
// controller), read with the node's own ServiceAccount (exchange.go) and
// copied into files on host storage, which the worker loads at start and
// again whenever a read changed them (run.go; the host swaps the running
// worker's credentials, host/credentials.go), so a renewed certificate is
// served without a restart. They are read again every refresh interval; a
// failed read keeps the files already written, so an API outage keeps the
// host serving on the credentials it has (docs/replica-engine.md,
// "Kubernetes mode": only a sufficiently long outage, past the
// certificates' validity, denies service).

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/durable"
)

// secretName is the replica's Secret, as the volume controller names it.
func secretName(replica string) string { return replica + "-tls" }

// credentialFiles are the paths a WorkerSpec names.
type credentialFiles struct{ CA, Cert, Key, Token string }

type credentials struct {
	dir  string
	mu   sync.Mutex
	read map[string]time.Time // replica -> when its Secret was last read
	// unloaded are the replicas whose files changed since their worker
	// last loaded them.
	unloaded map[string]bool
}

func newCredentials(dir string) *credentials {
	return &credentials{dir: dir, read: map[string]time.Time{}, unloaded: map[string]bool{}}
}

// changed reports whether the replica's files changed since loaded was
// last called for it.
func (c *credentials) changed(replica string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unloaded[replica]
}

// loaded records that the replica's worker holds what its files hold.
func (c *credentials) loaded(replica string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.unloaded, replica)
}

func (c *credentials) files(replica string) credentialFiles {
	d := filepath.Join(c.dir, replica)
	return credentialFiles{CA: filepath.Join(d, "ca.crt"), Cert: filepath.Join(d, "tls.crt"),
		Key: filepath.Join(d, "tls.key"), Token: filepath.Join(d, "token")}
}

// refresh reads the replica's Secret when it was never read or the last
// read is older than every, and writes what changed. It returns the files
// whenever they exist, with the read's error: (files, err) means the host
// serves on what it had.
func (c *credentials) refresh(ctx context.Context, r secretGetter, vr *storagev1alpha1.VolumeReplica, every time.Duration) (*credentialFiles, error) {
	f := c.files(vr.Name)
	c.mu.Lock()
	last, ok := c.read[vr.Name]
	c.mu.Unlock()
	_, statErr := os.Stat(f.Token)
	have := ok && statErr == nil
	if have && time.Since(last) < every {
		return &f, nil
	}
	err := c.fetch(ctx, r, vr, f)
	if err == nil {
		c.mu.Lock()
		c.read[vr.Name] = time.Now()
		c.mu.Unlock()
		return &f, nil
	}
	if have {
		return &f, err
	}
	return nil, err
}

func (c *credentials) fetch(ctx context.Context, r secretGetter, vr *storagev1alpha1.VolumeReplica, f credentialFiles) error {
	name := secretName(vr.Name)
	s, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read secret %s/%s: %w", vr.Namespace, name, err)
	}
	if s.Labels[storagev1alpha1.LabelReplica] != vr.Name {
		return fmt.Errorf("secret %s/%s is not labelled %s=%s: not this replica's", vr.Namespace, name, storagev1alpha1.LabelReplica, vr.Name)
	}
	// The engine verifies one bearer token: the mount token, which the
	// volume's mount owners present (peers authenticate by their
	// certificates' SANs).
	want := map[string][]byte{
		f.CA: s.Data[storagev1alpha1.SecretKeyCACert], f.Cert: s.Data[storagev1alpha1.SecretKeyCert],
		f.Key: s.Data[storagev1alpha1.SecretKeyKey], f.Token: s.Data[storagev1alpha1.SecretKeyMountToken],
	}
	for p, b := range want {
		if len(b) == 0 {
			return fmt.Errorf("secret %s/%s lacks the key for %s", vr.Namespace, name, filepath.Base(p))
		}
	}
	if err := os.MkdirAll(filepath.Dir(f.CA), 0o700); err != nil {
		return fmt.Errorf("credentials directory of %s: %w", vr.Name, err)
	}
	for p, b := range want {
		if cur, err := os.ReadFile(p); err == nil && bytes.Equal(cur, b) {
			continue
		}
		c.mu.Lock()
		c.unloaded[vr.Name] = true
		c.mu.Unlock()
		if err := durable.WriteFile(p, b); err != nil {
			return fmt.Errorf("write credentials of %s: %w", vr.Name, err)
		}
	}
	return nil
}

// forget removes a released replica's files.
func (c *credentials) forget(replica string) error {
	c.mu.Lock()
	delete(c.read, replica)
	delete(c.unloaded, replica)
	c.mu.Unlock()
	if err := os.RemoveAll(filepath.Join(c.dir, replica)); err != nil {
		return fmt.Errorf("remove credentials of %s: %w", replica, err)
	}
	return nil
}
