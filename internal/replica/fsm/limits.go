package fsm

// The volume's limits are replicated state, not local configuration: the
// capacity decides ENOSPC during apply and the exactly-once table's size
// decides which session is evicted, so two replicas configured differently
// would apply the same entry differently and diverge. They are set by a
// state-machine command the coordinator proposes before it serves its first
// term (Worker.establish), changed only by later commands (capacity only
// grows: volume expansion), and checkpointed with the rest of the state.
//
// Until the first command applies the defaults hold on every replica: a
// volume's entries before it (none, for a volume bootstrapped by this code)
// apply the same way everywhere.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// Limits are the volume's replicated limits.
type Limits struct {
	Capacity    uint64 // logical bytes of file data; ENOSPC beyond
	MaxSessions int    // exactly-once sessions kept (least recently used evicted)
}

// MaxSessionsLimit bounds Limits.MaxSessions: every session holds up to
// the per-session window of results.
const MaxSessionsLimit = 65536

// DefaultLimits are the limits in force before a limits command applies.
func DefaultLimits() Limits {
	return Limits{Capacity: 1 << 30, MaxSessions: 256}
}

// limitsMagic opens a limits command. A wire entry opens with its version
// byte (1), so the two never collide.
var limitsMagic = [8]byte{'C', 'F', 'L', 'I', 'M', 'I', 'T', 1}

const limitsCommandLen = len(limitsMagic) + 8 + 4

// ErrLimitsRefused is the response to a limits command the state machine
// does not apply (a shrinking capacity, an out-of-range table size).
var ErrLimitsRefused = errors.New("volume limits refused")

// EncodeSetLimits returns the command that sets the volume's limits.
func EncodeSetLimits(l Limits) []byte {
	b := make([]byte, 0, limitsCommandLen)
	b = append(b, limitsMagic[:]...)
	b = binary.BigEndian.AppendUint64(b, l.Capacity)
	return binary.BigEndian.AppendUint32(b, uint32(l.MaxSessions))
}

// decodeSetLimits reports whether data is a limits command.
func decodeSetLimits(data []byte) (Limits, bool) {
	if len(data) != limitsCommandLen || [8]byte(data[:8]) != limitsMagic {
		return Limits{}, false
	}
	return Limits{Capacity: binary.BigEndian.Uint64(data[8:16]), MaxSessions: int(binary.BigEndian.Uint32(data[16:20]))}, true
}

func (l Limits) validate() error {
	if l.Capacity == 0 || l.Capacity > wire.MaxFileSize {
		return fmt.Errorf("%w: capacity %d out of range", ErrLimitsRefused, l.Capacity)
	}
	if l.MaxSessions < 1 || l.MaxSessions > MaxSessionsLimit {
		return fmt.Errorf("%w: maxSessions %d out of range 1..%d", ErrLimitsRefused, l.MaxSessions, MaxSessionsLimit)
	}
	return nil
}

// applyLimits applies a limits command; its response is nil or an error
// wrapping ErrLimitsRefused, the same on every replica.
func (f *FSM) applyLimits(index uint64, l Limits) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.Applied = index
	if err := l.validate(); err != nil {
		return err
	}
	if cur := f.st.Limits; cur != nil && l.Capacity < cur.Capacity {
		return fmt.Errorf("%w: capacity %d below the current %d (capacity only grows)", ErrLimitsRefused, l.Capacity, cur.Capacity)
	}
	f.st.Limits = &l
	f.evictSessions()
	return nil
}

// limits returns the limits in force. Callers hold f.mu.
func (f *FSM) limits() Limits {
	if f.st.Limits == nil {
		return DefaultLimits()
	}
	return *f.st.Limits
}

// Limits returns the limits in force and whether a limits command set them.
func (f *FSM) Limits() (Limits, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.limits(), f.st.Limits != nil
}
