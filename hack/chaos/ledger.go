package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// event is one line of the ledger. The workload writes a "try" line before
// an operation that changes the volume and an "ack" line once the
// operation and its fsync returned 0: only acked operations must be found
// on the volume; tried ones tell the checker which newer, unacknowledged
// versions it may legitimately find instead.
type event struct {
	Kind  string `json:"k"`            // append, overwrite, create, unlink, rename, truncate, register, error, ready, done
	Phase string `json:"p,omitempty"`  // try, ack, fail
	W     int    `json:"w,omitempty"`  // appender or register file
	Slot  int    `json:"s,omitempty"`  // record slot
	Ver   uint64 `json:"v,omitempty"`  // version written (overwrite, rename, truncate, register value)
	Name  string `json:"n,omitempty"`  // file name
	Size  int64  `json:"sz,omitempty"` // truncate size
	Dir   bool   `json:"d,omitempty"`  // the create's directory was fsynced too
	Read  bool   `json:"r,omitempty"`  // register: a read
	Call  int64  `json:"c,omitempty"`  // register: call time (ns since the worker's start)
	Ret   int64  `json:"t,omitempty"`  // register: return time, 0 if the outcome is unknown
	Op    string `json:"op,omitempty"` // error: the operation that failed
	Err   string `json:"e,omitempty"`  // error: errno name
}

// ledger streams events to a file outside the volume, one write(2) per
// line: a kill of anything but the workload process loses none of them
// (the page cache keeps them), and the nemesis reads it after the workload
// stopped.
type ledger struct {
	mu sync.Mutex
	f  *os.File
}

func openLedger(path string) (*ledger, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return &ledger{f: f}, nil
}

func (l *ledger) add(e event) {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // a plain struct always marshals
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(b); err != nil {
		// A ledger that misses an ack would make the check miss a loss:
		// the workload must not go on without it.
		fmt.Fprintln(os.Stderr, "worker: write ledger:", err)
		os.Exit(4)
	}
}

func (l *ledger) close() error { return l.f.Close() }

func loadLedger(path string) ([]event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Only the last line can be torn (the workload was killed).
			continue
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
