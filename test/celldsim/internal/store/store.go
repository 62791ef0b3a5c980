// Package store is celldsim's durable record log: an append-only file of
// checksummed frames under the member's state directory (CELLD_WATCH), fsynced
// before an append returns, replayed into memory on open. A torn or corrupt
// tail (a crash mid-append) is truncated on open; every frame before it is
// intact, so what was acknowledged survives a kill -9.
//
// It owns the on-disk format only and must never import the member's HTTP or
// replication code.
package store

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// LogName is the record log's file name inside the state directory.
const LogName = "celldsim.log"

// MaxKeyLen and MaxValueLen bound one record; the HTTP layer enforces them too.
const (
	MaxKeyLen   = 256
	MaxValueLen = 64 << 10
)

// frameHeader is length (4 bytes) then CRC-32C of the payload (4 bytes).
const frameHeader = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one key and its value. Records are immutable: a key written
// twice must carry the same value.
type Record struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ErrConflict is returned when a key is written again with another value.
var ErrConflict = errors.New("key already holds a different value")

// Store is the open record log. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	f       *os.File
	records map[string]string
}

// Open replays the log in dir (creating it when absent), truncating a torn
// tail, and returns the store with every intact record loaded.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create state directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, LogName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open record log %s: %w", path, err)
	}
	s := &Store{f: f, records: map[string]string{}}
	good, err := s.replay()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("truncate torn tail of %s at %d: %w", path, good, err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("seek %s: %w", path, err)
	}
	if err := durable.SyncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// replay loads frames until the first incomplete or corrupt one and returns
// the offset just past the last intact frame.
func (s *Store) replay() (int64, error) {
	r := bufio.NewReader(s.f)
	var off int64
	hdr := make([]byte, frameHeader)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return off, nil // clean end or torn header
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		if n > MaxKeyLen+MaxValueLen+64 {
			return off, nil // corrupt length: treat as torn tail
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return off, nil
		}
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(hdr[4:8]) {
			return off, nil
		}
		var rec Record
		if err := json.Unmarshal(payload, &rec); err != nil {
			return off, nil
		}
		s.records[rec.Key] = rec.Value
		off += frameHeader + int64(n)
	}
}

// Put appends the record and fsyncs it before returning. Writing a key again
// with the same value is a no-op; with another value it fails with ErrConflict.
func (s *Store) Put(rec Record) error { return s.PutAll([]Record{rec}) }

// PutAll appends every record not yet held and fsyncs once before returning
// (recovery copies a whole peer log this way). It fails without writing
// anything when a record is invalid or conflicts with a held one.
func (s *Store) PutAll(recs []Record) error {
	var buf []byte
	for _, rec := range recs {
		if err := Validate(rec); err != nil {
			return err
		}
		payload, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("encode record %q: %w", rec.Key, err)
		}
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
		buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(payload, castagnoli))
		buf = append(buf, payload...)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return errors.New("record log is closed")
	}
	fresh := make(map[string]string, len(recs))
	for _, rec := range recs {
		held, ok := s.records[rec.Key]
		if !ok {
			held, ok = fresh[rec.Key]
		}
		if ok && held != rec.Value {
			return fmt.Errorf("put %q: %w", rec.Key, ErrConflict)
		}
		fresh[rec.Key] = rec.Value
	}
	if len(recs) == 1 {
		if _, ok := s.records[recs[0].Key]; ok {
			return nil // an identical rewrite
		}
	}
	// Records already held are appended again when batched with new ones;
	// replay keeps the first, identical, value.
	if _, err := s.f.Write(buf); err != nil {
		return fmt.Errorf("append %d records: %w", len(recs), err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("fsync %d records: %w", len(recs), err)
	}
	for k, v := range fresh {
		s.records[k] = v
	}
	return nil
}

// Get returns the value of key and whether it is held.
func (s *Store) Get(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.records[key]
	return v, ok
}

// Len is the number of records held.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// All returns every record, ordered by key.
func (s *Store) All() []Record {
	s.mu.Lock()
	out := make([]Record, 0, len(s.records))
	for k, v := range s.records {
		out = append(out, Record{Key: k, Value: v})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Close closes the log file.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// Validate bounds a record before it is stored or sent.
func Validate(rec Record) error {
	switch {
	case rec.Key == "":
		return errors.New("record key is empty")
	case len(rec.Key) > MaxKeyLen:
		return fmt.Errorf("record key is %d bytes, above the limit of %d", len(rec.Key), MaxKeyLen)
	case len(rec.Value) > MaxValueLen:
		return fmt.Errorf("record value is %d bytes, above the limit of %d", len(rec.Value), MaxValueLen)
	}
	return nil
}
