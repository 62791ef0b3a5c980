package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Layout of a replica's data directory.
const (
	JournalDir    = "journal"     // stable.json and *.seg segment files
	CheckpointDir = "checkpoints" // raft file snapshot store
)

// LostError reports a recorded replica whose authority on disk is gone. The
// application data extent is unknown: this is a loss of replica authority,
// not a claim that every byte is lost.
type LostError struct {
	Volume, Replica string
	Reason          string
}

func (e *LostError) Error() string {
	return fmt.Sprintf("replica %s of volume %s lost: %s (application data extent unknown; never initialised afresh)",
		e.Replica, e.Volume, e.Reason)
}

// ErrLost matches every *LostError with errors.Is.
var ErrLost = errors.New("replica lost")

// Is makes errors.Is(err, ErrLost) true for a LostError.
func (e *LostError) Is(target error) bool { return target == ErrLost }

// ErrIdentityMismatch reports a data directory that belongs to another
// replica or generation.
var ErrIdentityMismatch = errors.New("data directory belongs to another replica")

// Verdict is the outcome of Check.
type Verdict struct {
	Fresh    bool     // nothing recorded (or an unsealed initialisation): initialise
	Identity Identity // the record found (or to be written when Fresh)
}

// Check decides whether the replica described by want may start from dir.
// recorded says whether the host's own history says this replica was
// initialised before (it survives a wiped data directory).
func Check(dir string, want Identity, recorded bool) (Verdict, error) {
	lost := func(reason string) (Verdict, error) {
		return Verdict{}, &LostError{Volume: want.Volume, Replica: want.Replica, Reason: reason}
	}
	id, err := ReadIdentity(dir)
	journal := journalPresent(filepath.Join(dir, JournalDir))
	switch {
	case errors.Is(err, ErrIdentityMissing):
		if recorded {
			return lost("identity record missing for a replica the host recorded as initialised")
		}
		if journal != journalAbsent {
			return lost("identity record missing beside an existing journal")
		}
		return Verdict{Fresh: true, Identity: want}, nil
	case errors.Is(err, ErrIdentityCorrupt):
		return lost(err.Error())
	case err != nil:
		return Verdict{}, err
	}
	if !id.Sealed && id.Volume == want.Volume && id.Replica == want.Replica {
		if recorded {
			return lost("identity record unsealed for a replica the host recorded as sealed")
		}
		return Verdict{Fresh: true, Identity: want}, nil
	}
	if id.Volume != want.Volume || id.Replica != want.Replica || id.Generation != want.Generation {
		return Verdict{}, fmt.Errorf("%w: found %s/%s generation %d, want %s/%s generation %d",
			ErrIdentityMismatch, id.Volume, id.Replica, id.Generation, want.Volume, want.Replica, want.Generation)
	}
	switch journal {
	case journalAbsent:
		return lost("journal missing")
	case journalTruncated:
		return lost("journal truncated: its stable store or every segment is missing")
	}
	return Verdict{Identity: id}, nil
}

type journalState int

const (
	journalAbsent journalState = iota
	journalTruncated
	journalIntact
)

func journalPresent(dir string) journalState {
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		return journalAbsent
	}
	meta, segments := false, 0
	for _, e := range ents {
		switch {
		case e.Name() == stableFile:
			meta = true
		case strings.HasSuffix(e.Name(), segSuffix):
			segments++
		}
	}
	if !meta || segments == 0 {
		return journalTruncated
	}
	return journalIntact
}

// CheckFloor reports journal and checkpoints that cannot rebuild the state:
// they end below the identity's recorded floor (acknowledged history is
// gone), or the journal starts after the newest checkpoint (a compacted
// prefix whose checkpoint is missing).
func CheckFloor(id Identity, firstLog, lastLog, lastCheckpoint uint64) error {
	lost := func(reason string) error {
		return &LostError{Volume: id.Volume, Replica: id.Replica, Reason: reason}
	}
	if top := max(lastLog, lastCheckpoint); top < id.Floor {
		return lost(fmt.Sprintf("journal and checkpoints end at index %d, below the recorded floor %d", top, id.Floor))
	}
	if firstLog > 1 && lastCheckpoint < firstLog-1 {
		return lost(fmt.Sprintf("journal starts at index %d but the newest checkpoint covers only up to %d", firstLog, lastCheckpoint))
	}
	return nil
}
