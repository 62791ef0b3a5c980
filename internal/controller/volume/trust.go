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
//
// Renewal (docs/volume-controller.md, "Certificate renewal"): a replica's
// certificate lives CertificateValidity (--replica-certificate-validity)
// and is replaced, by the same CA and with the same SANs, two thirds into
// its life; the reconcile is requeued for that moment. Both certificates
// chain to the one CA, so every peer and mount owner accepts the old one
// until it expires and the new one from its issue: the last third is the
// overlap in which the hosts load the new one (kubehost's credentials
// refresh, host/credentials.go). A certificate that would outlive one issued
// now (made under a longer validity) is replaced at once. The CA and the
// tokens are not rotated.

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

// Lifetimes. A replica certificate lives CertificateValidity (the flag,
// default 90 days; at least an hour, so the hosts' refresh has a third of it
// to load the renewed one; at most half the CA's life); the volume's CA,
// which is not rotated, outlives any volume.
const (
	DefaultCertificateValidity = 90 * 24 * time.Hour
	MinCertificateValidity     = time.Hour
	MaxCertificateValidity     = caValidity / 2
	caValidity                 = 10 * 365 * 24 * time.Hour
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

// ensureReplicaSecret writes one replica's material unless it exists, was
// issued by the volume's CA and its certificate is not yet due for renewal.
// It returns when that renewal is due.
func (r *Reconciler) ensureReplicaSecret(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, t *volumeTrust, vr *storagev1alpha1.VolumeReplica) (time.Time, error) {
	name := replicaSecretName(vr.Name)
	dns := serviceDNSName(vr.Name, r.namespace)
	build := func() (map[string][]byte, error) {
		cert, key, err := t.ca.Issue([]string{dns, dns + ".cluster.local"}, r.certValidity)
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
	return r.ensureSecret(ctx, rv, meta, t, build, r.renewalDue)
}

// renewalDue is when the certificate in a replica Secret's data must be
// replaced: two thirds into its life (pki.RenewalDue), or now when it
// cannot be read or expires after one issued now would.
func (r *Reconciler) renewalDue(data map[string][]byte) time.Time {
	now := time.Now()
	cert, err := pki.ParseCertificate(data[storagev1alpha1.SecretKeyCert])
	if err != nil || cert.NotAfter.After(now.Add(r.certValidity)) {
		return now
	}
	return pki.RenewalDue(cert)
}

// ensureMountSecret writes what a mount owner needs, and nothing more.
func (r *Reconciler) ensureMountSecret(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, t *volumeTrust) error {
	build := func() (map[string][]byte, error) {
		return map[string][]byte{
			storagev1alpha1.SecretKeyCACert:     t.ca.CertPEM,
			storagev1alpha1.SecretKeyMountToken: t.mountToken,
		}, nil
	}
	_, err := r.ensureSecret(ctx, rv, r.childMeta(rv, r.namespace, mountSecretName(rv.Name)), t, build, nil)
	return err
}

// ensureSecret creates a Secret from build, or rewrites one of this volume
// whose CA certificate is not the volume's (left by an interrupted earlier
// attempt) or, with due, whose renewal is due. It returns when the
// renewal of what the Secret now holds is due (zero without due). A Secret
// at the name that belongs to something else is an error.
func (r *Reconciler) ensureSecret(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, meta metav1.ObjectMeta, t *volumeTrust,
	build func() (map[string][]byte, error), due func(map[string][]byte) time.Time) (time.Time, error) {
	dueOf := func(data map[string][]byte) time.Time {
		if due == nil {
			return time.Time{}
		}
		return due(data)
	}
	cur := &corev1.Secret{}
	err := r.reader.Get(ctx, client.ObjectKey{Namespace: meta.Namespace, Name: meta.Name}, cur)
	switch {
	case apierrors.IsNotFound(err):
		data, err := build()
		if err != nil {
			return time.Time{}, err
		}
		s := &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque, Data: data}
		if err := r.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return time.Time{}, fmt.Errorf("create secret %s/%s: %w", meta.Namespace, meta.Name, err)
		}
		return dueOf(data), nil
	case err != nil:
		return time.Time{}, fmt.Errorf("read secret %s/%s: %w", meta.Namespace, meta.Name, err)
	}
	if !ownedBy(cur, rv) {
		return time.Time{}, fmt.Errorf("secret %s/%s exists and is not volume %s's: it is left alone", meta.Namespace, meta.Name, rv.Name)
	}
	sameCA := bytes.Equal(cur.Data[storagev1alpha1.SecretKeyCACert], t.ca.CertPEM)
	at := dueOf(cur.Data)
	renew := !at.IsZero() && !at.After(time.Now())
	if sameCA && !renew {
		return at, nil
	}
	data, err := build()
	if err != nil {
		return time.Time{}, err
	}
	cur.Data = data
	why := "for the volume's CA"
	if sameCA {
		why = "to renew its certificate, due " + at.UTC().Format(time.RFC3339)
	}
	if err := r.client.Update(ctx, cur); err != nil {
		return time.Time{}, fmt.Errorf("rewrite secret %s/%s %s: %w", meta.Namespace, meta.Name, why, err)
	}
	if renew {
		r.log.Info("renewed replica certificate", "volume", rv.Name, "secret", meta.Namespace+"/"+meta.Name, "renewalDue", at)
	}
	return dueOf(data), nil
}

// earliest is the earlier of two times, a zero time being none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// renewalIn is how long until at, at least a second; zero for a zero time.
func renewalIn(at time.Time) time.Duration {
	if at.IsZero() {
		return 0
	}
	return max(time.Until(at), time.Second)
}
