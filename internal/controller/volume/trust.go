package volume

// Trust (docs/volume-controller.md, "Trust and who reads what"): TLS roots,
// SANs and bearer tokens are per volume, and no CA is shared between volumes.
// Each volume gets its own CA, created once and kept in a Secret in the
// manager's namespace together with the volume's peer and mount tokens; that
// Secret is the only place the CA key exists. What the nodes need is copied
// out of it into Secrets in the storage namespace:
//   - one Secret per replica (`<replica>-tls`, labelled with its node): the
//     CA certificate, the replica's certificate and key with its Service's
//     DNS names as SANs, the peer token and the mount token (the worker
//     verifies mount owners with it);
//   - one mount Secret per volume (`<volume>-mount`): the CA certificate and
//     the mount token, for the node plugin's mount owner.
// A CA Secret that exists but cannot be read is an error, never replaced: a
// new CA would silently cut the running replicas off from each other.

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/replica/pki"
)

// Validity of the volume's CA and replica certificates. Rotation is not
// implemented yet, so they outlive any volume this release provisions.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 10 * 365 * 24 * time.Hour
)

// volumeTrust is a volume's CA and tokens, read from its CA Secret.
type volumeTrust struct {
	ca                    *pki.CA
	peerToken, mountToken []byte
	secret                *corev1.Secret
}

// ensureCA returns the volume's trust, creating its CA Secret on first use.
func (r *Reconciler) ensureCA(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume) (*volumeTrust, error) {
	key := client.ObjectKey{Namespace: r.managerNamespace, Name: caSecretName(rv.Name)}
	s := &corev1.Secret{}
	err := r.reader.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		s, err = r.createCA(ctx, rv)
		if apierrors.IsAlreadyExists(err) {
			err = r.reader.Get(ctx, key, s)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("CA secret %s of volume %s: %w", key, rv.Name, err)
	}
	if !ownedBy(s, rv) {
		return nil, fmt.Errorf("CA secret %s is not owned by volume %s (uid %s): refusing to use another volume's CA", key, rv.Name, rv.UID)
	}
	ca, err := pki.LoadCA(s.Data[storagev1alpha1.SecretKeyCACert], s.Data[storagev1alpha1.SecretKeyCAKey])
	if err != nil {
		return nil, fmt.Errorf("CA secret %s of volume %s is unreadable (it is kept, not replaced): %w", key, rv.Name, err)
	}
	t := &volumeTrust{ca: ca, peerToken: s.Data[storagev1alpha1.SecretKeyPeerToken],
		mountToken: s.Data[storagev1alpha1.SecretKeyMountToken], secret: s}
	if len(t.peerToken) == 0 || len(t.mountToken) == 0 {
		return nil, fmt.Errorf("CA secret %s of volume %s lacks %s or %s", key, rv.Name,
			storagev1alpha1.SecretKeyPeerToken, storagev1alpha1.SecretKeyMountToken)
	}
	return t, nil
}

func (r *Reconciler) createCA(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume) (*corev1.Secret, error) {
	ca, err := pki.NewCA(rv.Name, caValidity)
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: r.childMeta(rv, r.managerNamespace, caSecretName(rv.Name)),
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			storagev1alpha1.SecretKeyCACert:     ca.CertPEM,
			storagev1alpha1.SecretKeyCAKey:      ca.KeyPEM,
			storagev1alpha1.SecretKeyPeerToken:  []byte(pki.NewToken()),
			storagev1alpha1.SecretKeyMountToken: []byte(pki.NewToken()),
		},
	}
	if err := r.client.Create(ctx, s); err != nil {
		return nil, err
	}
	r.log.Info("created volume CA", "volume", rv.Name, "secret", s.Namespace+"/"+s.Name)
	return s, nil
}

// ensureReplicaSecret writes one replica's material unless it exists and
// was issued by the volume's CA.
func (r *Reconciler) ensureReplicaSecret(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, t *volumeTrust, vr *storagev1alpha1.VolumeReplica) error {
	name := replicaSecretName(vr.Name)
	dns := serviceDNSName(vr.Name, r.namespace)
	build := func() (map[string][]byte, error) {
		cert, key, err := t.ca.Issue([]string{dns, dns + ".cluster.local"}, certValidity)
		if err != nil {
			return nil, fmt.Errorf("issue certificate of replica %s: %w", vr.Name, err)
		}
		return map[string][]byte{
			storagev1alpha1.SecretKeyCACert:     t.ca.CertPEM,
			storagev1alpha1.SecretKeyCert:       cert,
			storagev1alpha1.SecretKeyKey:        key,
			storagev1alpha1.SecretKeyPeerToken:  t.peerToken,
			storagev1alpha1.SecretKeyMountToken: t.mountToken,
		}, nil
	}
	meta := r.childMeta(rv, r.namespace, name)
	meta.Labels[storagev1alpha1.LabelNode] = vr.Spec.Node
	meta.Labels[storagev1alpha1.LabelReplica] = vr.Name
	return r.ensureSecret(ctx, rv, meta, t, build)
}

// ensureMountSecret writes what a mount owner needs, and nothing more.
func (r *Reconciler) ensureMountSecret(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, t *volumeTrust) error {
	build := func() (map[string][]byte, error) {
		return map[string][]byte{
			storagev1alpha1.SecretKeyCACert:     t.ca.CertPEM,
			storagev1alpha1.SecretKeyMountToken: t.mountToken,
		}, nil
	}
	return r.ensureSecret(ctx, rv, r.childMeta(rv, r.namespace, mountSecretName(rv.Name)), t, build)
}

// ensureSecret creates a Secret from build, or rewrites one of this volume
// whose CA certificate is not the volume's (left by an interrupted earlier
// attempt). A Secret at the name that belongs to something else is an error.
func (r *Reconciler) ensureSecret(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, meta metav1.ObjectMeta, t *volumeTrust,
	build func() (map[string][]byte, error)) error {
	cur := &corev1.Secret{}
	err := r.reader.Get(ctx, client.ObjectKey{Namespace: meta.Namespace, Name: meta.Name}, cur)
	switch {
	case apierrors.IsNotFound(err):
		data, err := build()
		if err != nil {
			return err
		}
		s := &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque, Data: data}
		if err := r.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create secret %s/%s: %w", meta.Namespace, meta.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read secret %s/%s: %w", meta.Namespace, meta.Name, err)
	}
	if !ownedBy(cur, rv) {
		return fmt.Errorf("secret %s/%s exists and is not volume %s's: it is left alone", meta.Namespace, meta.Name, rv.Name)
	}
	if bytes.Equal(cur.Data[storagev1alpha1.SecretKeyCACert], t.ca.CertPEM) {
		return nil
	}
	data, err := build()
	if err != nil {
		return err
	}
	cur.Data = data
	if err := r.client.Update(ctx, cur); err != nil {
		return fmt.Errorf("rewrite secret %s/%s for the volume's CA: %w", meta.Namespace, meta.Name, err)
	}
	return nil
}
