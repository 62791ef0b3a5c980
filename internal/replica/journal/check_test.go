package journal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckDecidesFreshStartOrLoss(t *testing.T) {
	want := Identity{Volume: "v", Replica: "r0", Generation: 1}
	sealed := want
	sealed.Sealed = true
	withJournal := func(t *testing.T, dir string) {
		l, _, err := OpenLog(filepath.Join(dir, JournalDir), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	cases := []struct {
		name     string
		prepare  func(t *testing.T, dir string)
		recorded bool
		fresh    bool
		lost     bool
		mismatch bool
	}{
		{name: "empty directory, never recorded", prepare: func(*testing.T, string) {}, fresh: true},
		{name: "empty directory the host recorded", prepare: func(*testing.T, string) {}, recorded: true, lost: true},
		{name: "journal without identity", prepare: withJournal, lost: true},
		{name: "sealed identity without journal", prepare: func(t *testing.T, d string) { WriteIdentity(d, sealed) }, lost: true},
		{name: "sealed identity, journal lost its segments", prepare: func(t *testing.T, d string) {
			WriteIdentity(d, sealed)
			withJournal(t, d)
			matches, _ := filepath.Glob(filepath.Join(d, JournalDir, "*"+segSuffix))
			for _, m := range matches {
				os.Remove(m)
			}
		}, lost: true},
		{name: "corrupt identity", prepare: func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, IdentityFile), []byte(`{"volume":"v"`), 0o600)
		}, lost: true},
		{name: "unsealed identity is a crashed initialisation", prepare: func(t *testing.T, d string) { WriteIdentity(d, want) }, fresh: true},
		{name: "unsealed identity of a replica the host recorded as sealed", prepare: func(t *testing.T, d string) {
			WriteIdentity(d, want)
			withJournal(t, d)
		}, recorded: true, lost: true},
		{name: "intact replica", prepare: func(t *testing.T, d string) { WriteIdentity(d, sealed); withJournal(t, d) }, recorded: true},
		{name: "another generation", prepare: func(t *testing.T, d string) {
			other := sealed
			other.Generation = 2
			WriteIdentity(d, other)
			withJournal(t, d)
		}, mismatch: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.prepare(t, dir)
			v, err := Check(dir, want, tc.recorded)
			switch {
			case tc.lost:
				var le *LostError
				if !errors.As(err, &le) || !errors.Is(err, ErrLost) {
					t.Fatalf("want ReplicaStateLost, got %v", err)
				}
			case tc.mismatch:
				if !errors.Is(err, ErrIdentityMismatch) {
					t.Fatalf("want identity mismatch, got %v", err)
				}
			case err != nil:
				t.Fatalf("unexpected error %v", err)
			case v.Fresh != tc.fresh:
				t.Fatalf("fresh = %v, want %v", v.Fresh, tc.fresh)
			}
		})
	}
}

func TestCheckFloorDetectsATruncatedJournal(t *testing.T) {
	id := Identity{Volume: "v", Replica: "r", Floor: 100}
	if err := CheckFloor(id, 1, 90, 80); !errors.Is(err, ErrLost) {
		t.Fatalf("a journal ending below the recorded floor must be lost, got %v", err)
	}
	if err := CheckFloor(id, 50, 90, 100); err != nil {
		t.Fatalf("a checkpoint at the floor suffices: %v", err)
	}
	if err := CheckFloor(id, 150, 190, 100); !errors.Is(err, ErrLost) {
		t.Fatalf("a compacted journal without the checkpoint before it must be lost, got %v", err)
	}
}
