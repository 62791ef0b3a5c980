package mux

// Credentials that change while the port serves (docs/replica-engine.md,
// "Transport and trust"): the volume controller renews a replica's
// certificate two thirds into its life, and the host hands the worker the
// new one without restarting it. The port reads the set current at each
// TLS handshake (its own and every Raft dial) and each client hello, so a
// new set takes effect for the next connection; established connections
// keep the keys they were opened with and are never dropped for it.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"sync/atomic"
)

// MinTokenLen is the shortest bearer token a port accepts to check.
const MinTokenLen = 16

// Credentials are what a port presents and trusts: its certificate, the
// volume's CA (one or more certificates; any of them is trusted) and the
// bearer token clients must present.
type Credentials struct {
	Certificate tls.Certificate
	CA          *x509.CertPool
	Token       string
}

func (c Credentials) validate() error {
	var errs []error
	if len(c.Certificate.Certificate) == 0 || c.Certificate.PrivateKey == nil {
		errs = append(errs, errors.New("a certificate with its key is required"))
	}
	if c.CA == nil {
		errs = append(errs, errors.New("the volume's CA is required"))
	}
	if len(c.Token) < MinTokenLen {
		errs = append(errs, errors.New("bearer token must be at least 16 bytes"))
	}
	return errors.Join(errs...)
}

// CredentialSet holds a port's current Credentials; Store swaps them
// atomically.
type CredentialSet struct {
	cur atomic.Pointer[Credentials]
}

// NewCredentialSet holds c, which must be complete.
func NewCredentialSet(c Credentials) (*CredentialSet, error) {
	s := &CredentialSet{}
	if err := s.Store(c); err != nil {
		return nil, err
	}
	return s, nil
}

// Load returns the current credentials.
func (s *CredentialSet) Load() *Credentials { return s.cur.Load() }

// Store makes c current from the next connection on. An incomplete set is
// refused and the current one kept.
func (s *CredentialSet) Store(c Credentials) error {
	if err := c.validate(); err != nil {
		return err
	}
	s.cur.Store(&c)
	return nil
}
