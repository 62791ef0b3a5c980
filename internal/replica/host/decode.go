package host

// Decoders of the admin API's requests. Each reads at most what the caller
// bounded (bounded() limits the body to maxBody), accepts exactly one JSON
// value with no unknown fields and nothing after it, and returns a value
// that passed its own validation, so a handler never acts on a partial or
// ambiguous request. They are fuzzed in decode_fuzz_test.go.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
)

// decodeStrict decodes exactly one JSON value with no unknown fields.
func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// decodeWorkerSpec reads the body of POST /v1/workers.
func decodeWorkerSpec(r io.Reader) (WorkerSpec, error) {
	var spec WorkerSpec
	if err := decodeStrict(r, &spec); err != nil {
		return WorkerSpec{}, fmt.Errorf("worker spec: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return WorkerSpec{}, err
	}
	return spec, nil
}

// maxNameLen bounds a member's ID and server name (a DNS name's limit).
const maxNameLen = 253

// decodeMember reads the body of POST .../members: the replica to add.
func decodeMember(r io.Reader) (replica.Peer, error) {
	var p replica.Peer
	if err := decodeStrict(r, &p); err != nil {
		return replica.Peer{}, fmt.Errorf("member: %w", err)
	}
	if err := validMember(p); err != nil {
		return replica.Peer{}, fmt.Errorf("member: %w", err)
	}
	return p, nil
}

func validMember(p replica.Peer) error {
	var errs []error
	if p.ID == "" || len(p.ID) > maxNameLen || strings.ContainsAny(p.ID, "/\\ @") {
		errs = append(errs, fmt.Errorf("id must be 1 to %d bytes without '/', '\\', '@' or spaces", maxNameLen))
	}
	if p.ServerName == "" || len(p.ServerName) > maxNameLen || strings.ContainsAny(p.ServerName, "/\\ @") {
		errs = append(errs, fmt.Errorf("serverName must be a DNS name of 1 to %d bytes", maxNameLen))
	}
	host, port, err := net.SplitHostPort(p.Address)
	if err == nil {
		n, perr := strconv.ParseUint(port, 10, 16)
		if perr != nil || n == 0 || host == "" || strings.ContainsAny(host, "/\\ @") {
			err = errors.New("want host:port with a port from 1 to 65535")
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("address %q: %w", p.Address, err))
	}
	return errors.Join(errs...)
}

// wait is a long poll's query: ?waitFor=STATE&timeout=D. A zero State
// means no wait.
type wait struct {
	State   replica.State
	Timeout time.Duration
}

// waitable are the states a long poll may wait for.
var waitable = []replica.State{replica.ReplicaStatePending, replica.ReplicaStateStarting, replica.ReplicaStateRunning,
	replica.ReplicaStateLost, replica.ReplicaStateFailed, replica.ReplicaStateStopped}

// decodeWait reads the query of GET /v1/workers/{volume}/{replica}.
func decodeWait(q url.Values) (wait, error) {
	want := q.Get("waitFor")
	if want == "" {
		if q.Has("timeout") {
			return wait{}, errors.New("timeout needs waitFor")
		}
		return wait{}, nil
	}
	if !slices.Contains(waitable, replica.State(want)) {
		return wait{}, fmt.Errorf("waitFor must be one of %v", waitable)
	}
	timeout, err := time.ParseDuration(q.Get("timeout"))
	if err != nil || timeout <= 0 || timeout > MaxWaitTimeout {
		return wait{}, fmt.Errorf("timeout must be a duration between 0 and %s", MaxWaitTimeout)
	}
	return wait{State: replica.State(want), Timeout: timeout}, nil
}
