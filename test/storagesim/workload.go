package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cellfleet/cellfleet/test/storagesim/api"
)

// workload is the fixture's state on one volume directory.
type workload struct {
	dir string
	log *slog.Logger
	rl  *recordLog
	seq atomic.Uint64 // last sequence handed out, records and files alike

	records, files, errs atomic.Int64
	mu                   sync.Mutex
	lastErr              string
	recovered            api.Stats
}

// open recovers the volume's log and files: numbering resumes past every
// sequence on the volume, so an acknowledged sequence is never reused.
func open(dir string, log *slog.Logger) (*workload, error) {
	w := &workload{dir: dir, log: log}
	if err := os.MkdirAll(w.filesDir(), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", w.filesDir(), err)
	}
	rl, recs, truncated, err := openLog(w.logPath())
	if err != nil {
		return nil, err
	}
	w.rl = rl
	maxFile, nFiles, err := maxFileSeq(w.filesDir())
	if err != nil {
		return nil, err
	}
	last := maxFile
	for _, r := range recs {
		last = maxU(last, r.seq)
	}
	w.seq.Store(last)
	w.recovered = api.Stats{RecoveredRecords: int64(len(recs)), RecoveredFiles: nFiles, TruncatedBytes: truncated}
	log.Info("volume recovered", "dir", dir, "records", len(recs), "files", nFiles, "truncatedBytes", truncated, "lastSeq", last)
	return w, nil
}

func (w *workload) logPath() string  { return filepath.Join(w.dir, logFileName) }
func (w *workload) filesDir() string { return filepath.Join(w.dir, filesDirName) }

// do runs one operation; an Ack is returned only once it is durable.
func (w *workload) do(kind api.Kind, payload []byte) (api.Ack, error) {
	seq := w.seq.Add(1)
	var err error
	switch kind {
	case api.KindRecord:
		err = w.rl.append(seq, payload)
	case api.KindFile:
		err = writeFile(w.filesDir(), seq, payload)
	default:
		err = fmt.Errorf("unknown operation kind %q", kind)
	}
	if err != nil {
		w.errs.Add(1)
		w.mu.Lock()
		w.lastErr = fmt.Sprintf("%s %d: %v", kind, seq, err)
		w.mu.Unlock()
		w.log.Warn("operation failed, not acknowledged", "kind", kind, "seq", seq, "err", err)
		return api.Ack{}, err
	}
	if kind == api.KindRecord {
		w.records.Add(1)
	} else {
		w.files.Add(1)
	}
	return api.Ack{Kind: kind, Seq: seq, CRC: api.Checksum(payload)}, nil
}

func (w *workload) stats() api.Stats {
	s := w.recovered
	s.Records, s.Files, s.Errors = w.records.Load(), w.files.Load(), w.errs.Load()
	w.mu.Lock()
	s.LastError = w.lastErr
	w.mu.Unlock()
	return s
}
