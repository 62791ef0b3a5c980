package chunkstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
)

// TestCapturesPersistedWhileWritesGoOnHoldTheirMomentsBytes runs the
// state machine's pattern: one goroutine writes and captures (raft's apply
// and Snapshot), another persists and releases each capture (raft's
// Persist) and a third reads (queries). Each capture must read as the file
// was when it was taken, and the live file must never read torn.
func TestCapturesPersistedWhileWritesGoOnHoldTheirMomentsBytes(t *testing.T) {
	s := open(t, t.TempDir(), Options{Retain: 2})
	const size = 4 * testChunk
	caps := make(chan *Capture, 4)
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)

	wg.Add(2)
	go func() { // persist; after a failure only release, so the writer never blocks
		defer wg.Done()
		var failed bool
		for c := range caps {
			err := checkStamped(c.ReadAt, c.Index(), size)
			if err == nil && !failed {
				_, err = s.Persist(c)
			}
			c.Release()
			if err != nil && !failed {
				failed = true
				errs <- err
			}
		}
	}()
	go func() { // query
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := checkStamped(s.ReadAt, 0, size); err != nil {
				errs <- err
				return
			}
		}
	}()
	for round := uint64(1); round <= 40; round++ { // apply
		if err := s.WriteAt(1, stamped(round, size), 0); err != nil {
			t.Fatal(err)
		}
		if round%4 == 0 {
			caps <- s.Capture(round)
		}
	}
	close(caps)
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// stamped is size bytes, every 8 of them round.
func stamped(round uint64, size int) []byte {
	p := make([]byte, size)
	for i := 0; i < size; i += 8 {
		binary.BigEndian.PutUint64(p[i:], round)
	}
	return p
}

// checkStamped reads file 1 whole and checks that one round wrote all of
// it: want, or any round when want is 0.
func checkStamped(readAt func(uint64, []byte, uint64) error, want uint64, size int) error {
	p := make([]byte, size)
	if err := readAt(1, p, 0); err != nil {
		return err
	}
	round := binary.BigEndian.Uint64(p)
	if want != 0 && round != want {
		return errors.New("a capture reads a later write")
	}
	if round != 0 && !bytes.Equal(p, stamped(round, size)) {
		return errors.New("a read saw a torn file")
	}
	return nil
}
