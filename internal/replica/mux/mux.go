package mux

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/recordbatch"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// HandshakeTimeout bounds a TLS handshake and the client hello.
const HandshakeTimeout = 10 * time.Second

// Config configures a worker's port.
type Config struct {
	Listen string // host:port to bind
	// Credentials are the port's certificate and the volume's CA (the only
	// trusted root), read at every handshake (credentials.go).
	Credentials *CredentialSet
	// AllowedPeer reports whether a Raft peer presenting a certificate with
	// this DNS SAN belongs to the volume.
	AllowedPeer func(san string) bool
	// Resolve maps a Raft address to the DNS SAN its certificate carries
	// and the host:port to dial.
	Resolve func(addr raft.ServerAddress) (san, dial string, ok bool)
	// OnRPC serves an authenticated-by-TLS client connection.
	OnRPC  func(*tls.Conn)
	Logger *slog.Logger
}

// Mux owns the listener.
type Mux struct {
	cfg    Config
	ln     net.Listener
	raftCh chan net.Conn
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	log    *slog.Logger
}

// Listen binds the port and starts accepting.
func Listen(cfg Config) (*Mux, error) {
	if cfg.AllowedPeer == nil || cfg.Resolve == nil || cfg.OnRPC == nil || cfg.Credentials == nil {
		return nil, errors.New("transport config needs Credentials, AllowedPeer, Resolve and OnRPC")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	m := &Mux{cfg: cfg, ln: ln, raftCh: make(chan net.Conn), done: make(chan struct{}), log: cfg.Logger}
	m.wg.Add(1)
	go m.accept()
	return m, nil
}

// Addr is the bound address.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// serverTLS answers each handshake with the credentials current then.
func (m *Mux) serverTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := m.cfg.Credentials.Load()
			return &tls.Config{
				Certificates: []tls.Certificate{c.Certificate},
				ClientCAs:    c.CA,
				ClientAuth:   tls.VerifyClientCertIfGiven,
				NextProtos:   []string{wire.ProtoRaft, wire.ProtoRPC},
				MinVersion:   tls.VersionTLS13,
			}, nil
		},
	}
}

func (m *Mux) accept() {
	defer m.wg.Done()
	conf := m.serverTLS()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.log.Error("accept failed; port closed", "error", err)
			return
		}
		go m.route(tls.Server(recordbatch.Wrap(c), conf))
	}
}

func (m *Mux) route(tc *tls.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		m.log.Debug("TLS handshake rejected", "remote", tc.RemoteAddr(), "error", err)
		tc.Close()
		return
	}
	st := tc.ConnectionState()
	switch st.NegotiatedProtocol {
	case wire.ProtoRaft:
		if err := m.checkPeer(st); err != nil {
			m.log.Warn("raft peer rejected", "remote", tc.RemoteAddr(), "error", err)
			tc.Close()
			return
		}
		select {
		case m.raftCh <- tc:
		case <-m.done:
			tc.Close()
		}
	case wire.ProtoRPC:
		m.cfg.OnRPC(tc)
	default:
		m.log.Warn("connection without a known protocol rejected", "remote", tc.RemoteAddr(), "alpn", st.NegotiatedProtocol)
		tc.Close()
	}
}

// checkPeer requires a verified client certificate naming a replica.
func (m *Mux) checkPeer(st tls.ConnectionState) error {
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return errors.New("raft peers must present a certificate from the volume's CA")
	}
	if slices.ContainsFunc(st.PeerCertificates[0].DNSNames, m.cfg.AllowedPeer) {
		return nil
	}
	return fmt.Errorf("certificate SANs %v name no replica of this volume", st.PeerCertificates[0].DNSNames)
}

// Close stops accepting; established connections are closed by their owners.
func (m *Mux) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		err = m.ln.Close()
	})
	m.wg.Wait()
	return err
}

// StreamLayer returns the raft.StreamLayer of this port.
func (m *Mux) StreamLayer() raft.StreamLayer { return (*streamLayer)(m) }

type streamLayer Mux

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.raftCh:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

func (s *streamLayer) Close() error   { return (*Mux)(s).Close() }
func (s *streamLayer) Addr() net.Addr { return s.ln.Addr() }

// Dial connects to a peer and verifies it presents the SAN the volume's
// configuration names for that address.
func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	name, dial, ok := s.cfg.Resolve(addr)
	if !ok {
		return nil, fmt.Errorf("no replica SAN known for raft address %s", addr)
	}
	creds := s.cfg.Credentials.Load()
	conf := &tls.Config{
		Certificates: []tls.Certificate{creds.Certificate},
		RootCAs:      creds.CA,
		ServerName:   name,
		NextProtos:   []string{wire.ProtoRaft},
		MinVersion:   tls.VersionTLS13,
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := recordbatch.DialTLS(ctx, &net.Dialer{Timeout: timeout}, dial, conf)
	if err != nil {
		return nil, fmt.Errorf("dial raft peer %s (%s): %w", addr, name, err)
	}
	if c.ConnectionState().NegotiatedProtocol != wire.ProtoRaft {
		c.Close()
		return nil, fmt.Errorf("raft peer %s does not speak %s", addr, wire.ProtoRaft)
	}
	return c, nil
}
