package journal

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// errNotFound is the error text hashicorp/raft expects for a missing key.
var errNotFound = errors.New("not found")

// stableStore keeps Raft's small durable values (current term, vote) in one
// JSON file replaced atomically on every change; elections are rare.
type stableStore struct {
	path string
	mu   sync.Mutex
	kv   map[string]string // base64 values
}

func openStable(path string) (*stableStore, error) {
	s := &stableStore{path: path, kv: map[string]string{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, s.writeLocked()
	}
	if err != nil {
		return nil, fmt.Errorf("read journal stable store: %w", err)
	}
	if err := json.Unmarshal(b, &s.kv); err != nil {
		return nil, fmt.Errorf("%w: stable store: %v", ErrCorrupt, err)
	}
	return s, nil
}

func (s *stableStore) writeLocked() error {
	b, _ := json.Marshal(s.kv)
	if err := durable.WriteFile(s.path, b); err != nil {
		return fmt.Errorf("write journal stable store: %w", err)
	}
	return nil
}

// Set implements raft.StableStore.
func (l *Log) Set(key, val []byte) error {
	s := l.stable
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kv[string(key)] = base64.StdEncoding.EncodeToString(val)
	return s.writeLocked()
}

// Get implements raft.StableStore.
func (l *Log) Get(key []byte) ([]byte, error) {
	s := l.stable
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kv[string(key)]
	if !ok {
		return nil, errNotFound
	}
	return base64.StdEncoding.DecodeString(v)
}

// SetUint64 implements raft.StableStore.
func (l *Log) SetUint64(key []byte, val uint64) error {
	return l.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore.
func (l *Log) GetUint64(key []byte) (uint64, error) {
	v, err := l.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable value %q is %d bytes", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
