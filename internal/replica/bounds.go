package replica

// The journal is bounded by bytes, not only by entries
// (docs/replica-engine.md, "Disk and memory bounds"). hashicorp/raft retains
// and compacts by entry count while one entry may carry maxEntryBytes, so
// three bounds are kept here:
//
//   - The journal stays under JournalBytes (J). The worker checkpoints when
//     its journal passes J/2 (raft.Snapshot, besides raft's own count
//     trigger), and a coordinator refuses new proposals (unavailable, the
//     client retries) while its journal plus what it has admitted but not
//     yet stored would pass J. A follower's journal holds only entries the
//     coordinator's did and it checkpoints at the same J/2.
//   - The chunks of deleted, truncated or punched ranges that only kept
//     checkpoints still name are freed by later checkpoints. A worker
//     checkpoints when they pass J/4, at most every heldInterval,
//     even on an idle volume: a coordinator with nothing new to checkpoint
//     commits a barrier, which gives every replica an entry to checkpoint
//     at, so the second checkpoint after a deletion frees its chunks.
//   - The entries a checkpoint leaves behind (raft's TrailingLogs) are the
//     newest that fit in J/8 bytes, recomputed from the journal's own frame
//     sizes before every check, and never more than the configured count.
//   - One catch-up request carries at most catchUpEntries entries (a
//     follower accepts acceptEntries), so a follower decodes at most
//     acceptEntries × maxEntryBytes at once.
//   - A follower reads a request's entries only while they and the
//     committed entries it has not applied yet fit in applyBacklogBytes:
//     raft hands committed entries to the state machine through a queue of
//     128 batches of up to catchUpEntries entries each, read back from the
//     journal, so a follower whose apply was slower than its journal held
//     up to 128 requests' worth of entries in memory.
//
// docs/replica-engine.md ("Disk and memory bounds") states the resulting
// disk formula.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellfleet/cellfleet/internal/replica/fsm"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

const (
	// maxEntryBytes bounds one journal entry: a call's data plus every
	// operation's names and fixed fields.
	maxEntryBytes = wire.MaxData + wire.MaxOps<<10
	// catchUpEntries is raft's MaxAppendEntries: with maxEntryBytes per
	// entry one request stays under 40 MiB. It was 16 (80 MiB): a
	// catching-up follower holds the request it decodes and the entries
	// its apply reads back, and the collector lets the heap grow to twice
	// what is live, so halving the request took the catch-up test's peak
	// RSS from 233-259 MiB to 168-172 MiB, and from 236-386 MiB to 182-220
	// MiB with a slowed backing tree (docs/replica-engine.md).
	catchUpEntries = 8
	// acceptEntries is the most entries a follower takes in one request:
	// hosts of the versions before sent up to 16, and a follower still
	// takes their requests during a rolling upgrade.
	acceptEntries = 16
	// DefaultJournalBytes is J when Timing.JournalBytes is zero.
	DefaultJournalBytes = 256 << 20
	// MinJournalBytes keeps room for a checkpoint's trailing entries and
	// a full catch-up request beside the trigger.
	MinJournalBytes = 64 << 20
	// boundInterval is how often a worker compares its journal with the
	// bound; a checkpoint takes longer than this.
	boundInterval = 250 * time.Millisecond
	// applyBacklogBytes bounds what a follower holds of entries it has
	// received but not applied: a request's entries are read only while
	// they and the committed entries not yet applied fit in it
	// (roomForEntries). One catch-up request of 4 MiB entries fills it, so
	// a catching-up follower decodes the next request only once it applied
	// the last; the mount's write-behind requests (up to four 4 MiB
	// entries) leave room for three more behind them.
	applyBacklogBytes = 64 << 20
	// applyBacklogSlack is a backlog that never holds a request back: the
	// state machine never sees raft's no-op entries, so a no-op at the end
	// of the committed entries stays in the backlog until a later entry is
	// applied, and that entry may be the one waiting.
	applyBacklogSlack = 1 << 20
	// heldInterval spaces the checkpoints taken for chunks only kept
	// checkpoints hold: under steady deletions the bound is passed again
	// at once, and each checkpoint flushes every chunk made since the last.
	heldInterval = 5 * time.Second
)

// journalBounds are a worker's byte bounds, derived from J.
type journalBounds struct {
	limit    int64  // J: the coordinator admits nothing beyond it
	trigger  int64  // a checkpoint is taken past it
	trailing int64  // bytes of entries a checkpoint leaves behind
	held     uint64 // deleted chunks only kept checkpoints name: a checkpoint past it
	maxCount uint64
}

func (c *Config) journalBounds() journalBounds {
	j := int64(c.Timing.JournalBytes)
	if j == 0 {
		j = DefaultJournalBytes
	}
	maxCount := c.Timing.TrailingLogs
	if maxCount == 0 {
		maxCount = raft.DefaultConfig().TrailingLogs
	}
	return journalBounds{limit: j, trigger: j / 2, trailing: j / 8, held: uint64(j / 4), maxCount: maxCount}
}

// initialTrailing is TrailingLogs before the journal's sizes are known:
// as if every entry were as large as it may be.
func (b journalBounds) initialTrailing() uint64 {
	return max(1, min(b.maxCount, uint64(b.trailing/maxEntryBytes)))
}

// admission counts proposal bytes a coordinator admitted that its journal
// has not stored yet.
type admission struct{ pending atomic.Int64 }

// ErrJournalFull: the coordinator's journal is at its byte bound until
// the checkpoint under way compacts it.
var ErrJournalFull = errors.New("journal at its byte bound; a checkpoint is compacting it")

// admit reserves n bytes of journal or refuses.
func (w *Worker) admit(n int) (release func(), err error) {
	total := w.admitted.pending.Add(int64(n))
	if w.wal.Bytes()+total > w.bounds.limit {
		w.admitted.pending.Add(-int64(n))
		return nil, ErrJournalFull
	}
	return func() { w.admitted.pending.Add(-int64(n)) }, nil
}

// boundJournal keeps the trailing entries within their byte budget and
// checkpoints when the journal passes its trigger, or when deleted chunks
// only kept checkpoints name pass theirs.
func (w *Worker) boundJournal() {
	defer w.wg.Done()
	t := time.NewTicker(boundInterval)
	defer t.Stop()
	var heldAt time.Time
	for {
		select {
		case <-w.stop:
			return
		case <-w.failed:
			return
		case <-t.C:
		}
		w.wal.DropIdle(time.Now())
		w.retainTrailing()
		switch {
		case w.wal.Bytes() >= w.bounds.trigger:
			if _, running := w.checkpoint("the journal's byte trigger"); !running {
				return
			}
		case time.Since(heldAt) >= heldInterval && w.fsm.Orphaned() >= w.bounds.held:
			heldAt = time.Now()
			if !w.releaseHeld() {
				return
			}
		}
	}
}

// checkpoint takes a checkpoint for why. It reports whether raft had
// nothing new to checkpoint, and false for running once raft has shut down.
func (w *Worker) checkpoint(why string) (nothingNew, running bool) {
	err := w.raft.Snapshot().Error()
	switch {
	case err == nil:
		w.log.Debug("checkpoint taken", "reason", why, "journalBytes", w.wal.Bytes())
	case errors.Is(err, raft.ErrNothingNewToSnapshot):
		return true, true
	case errors.Is(err, fsm.ErrCapturePending):
	case errors.Is(err, raft.ErrRaftShutdown):
		return false, false
	default:
		w.log.Warn("checkpoint failed", "reason", why, "journalBytes", w.wal.Bytes(), "error", err)
	}
	return false, true
}

// releaseHeld checkpoints so that deleted chunks only kept checkpoints
// name are freed. With nothing new to checkpoint (an idle volume after a deletion,
// whose newest checkpoint already follows it while the older one still
// names the deleted chunks), a coordinator commits a barrier: an entry
// every replica can checkpoint at on its next pass.
func (w *Worker) releaseHeld() bool {
	nothingNew, running := w.checkpoint("deleted chunks only kept checkpoints hold")
	if nothingNew && w.raft.State() == raft.Leader {
		if err := w.raft.Barrier(boundInterval).Error(); err != nil {
			w.log.Debug("barrier for a checkpoint failed", "error", err)
		}
	}
	return running
}

// retainTrailing sets raft's TrailingLogs to the newest entries that fit in
// the trailing budget.
func (w *Worker) retainTrailing() {
	want := max(1, min(w.bounds.maxCount, w.wal.NewestWithin(w.bounds.trailing)))
	rc := w.raft.ReloadableConfig()
	if rc.TrailingLogs == want {
		return
	}
	rc.TrailingLogs = want
	if err := w.raft.ReloadConfig(rc); err != nil {
		w.log.Warn("bounding the trailing entries failed", "trailingLogs", want, "error", err)
	}
}

// roomForEntries is raftnet's BeforeEntries: it holds a follower's next
// request while its payload and the entries the follower knows committed
// but has not applied would pass applyBacklogBytes, until the state machine
// catches up or ctx ends. A request larger than the bound is read once the
// backlog is empty.
//
// The backlog is counted up to the commit index, not the last index: the
// entries beyond it wait for a commit index that only a later request
// brings, so counting them could hold that request forever. Entries up to
// the commit index are applied without any further message, so the wait
// ends while the state machine works. Heartbeats never wait (raftnet calls
// this only for requests with entries), so a follower that waits is not
// taken for a lost one.
func (w *Worker) roomForEntries(ctx context.Context, payload int64) error {
	waited := false
	for {
		r := w.shared.Load()
		if r == nil {
			return nil
		}
		applied := w.fsm.Applied()
		backlog := w.wal.BytesBetween(applied, r.CommitIndex())
		if backlog <= applyBacklogSlack || backlog+payload <= applyBacklogBytes {
			return nil
		}
		if !waited {
			waited = true
			w.applyWaits.Add(1)
		}
		if err := w.fsm.WaitApplied(ctx, applied+1); err != nil {
			return fmt.Errorf("%d bytes of committed entries not applied: %w", backlog, err)
		}
	}
}
