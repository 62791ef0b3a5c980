package journal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func makeCheckpoint(t *testing.T, s *CheckpointStore, index uint64) string {
	t.Helper()
	sink, err := s.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("checkpoint state of some length")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(s.dir, "snapshots", sink.ID())
}

// raft's List leaves out a checkpoint whose metadata no longer parses and
// Open refuses one whose state fails its CRC; either way raft would restore
// the older one. Usable decides whether the journal still follows it.
func TestUsableRefusesAFallbackTheJournalNoLongerFollows(t *testing.T) {
	damage := map[string]func(dir string) error{
		"metadata": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "meta.json"), []byte("{\"ID\": 1"), 0o600)
		},
		"state": func(dir string) error {
			p := filepath.Join(dir, "state.bin")
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[3] ^= 1
			return os.WriteFile(p, b, 0o600)
		},
	}
	id := Identity{Volume: "v", Replica: "r1", Generation: 1}
	for name, corrupt := range damage {
		t.Run(name, func(t *testing.T) {
			s, err := OpenCheckpoints(t.TempDir(), 2, hclog.NewNullLogger(), nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			makeCheckpoint(t, s, 100)
			newest := makeCheckpoint(t, s, 200)
			if got, err := s.Usable(id, 150); err != nil || got != 200 {
				t.Fatalf("intact checkpoints: %d, %v; want 200", got, err)
			}
			if err := corrupt(newest); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Usable(id, 101); err != nil || got != 100 {
				t.Fatalf("a journal following the older checkpoint makes it usable: got %d, %v", got, err)
			}
			if _, err := s.Usable(id, 150); !errors.Is(err, ErrLost) {
				t.Fatalf("the journal starts at 150, past the older checkpoint at 100: want a LostError, got %v", err)
			}
		})
	}
}
