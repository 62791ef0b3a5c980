package fuse

// Directory name cache for single-writer volumes. The kernel asks LOOKUP
// for every name it has not seen, including each name a program is about to
// create (open with O_CREAT sends LOOKUP, then CREATE): on a volume only
// this mount changes, a name missing from a directory whose names the mount
// knows is missing on the volume too, and the answer needs no round trip to
// the coordinator. docs/performance.md (## FUSE mount) records the create
// rate this buys.
//
// A directory's names become known when this mount made the directory or
// listed it completely; every namespace change through the mount updates
// them, and a change whose outcome is not certain forgets the directory
// (so the next lookup asks the coordinator again). Only negative answers
// come from here: a name that exists is still looked up, for its
// attributes.

import (
	"errors"
	"sync"
	"syscall"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// maxCachedNames bounds the names held for all directories of one mount
// (about 64 bytes each); beyond it the cache starts over.
const maxCachedNames = 1 << 18

type names struct {
	mu    sync.Mutex
	dirs  map[uint64]map[string]struct{}
	total int
	// epoch counts changes; a listing is recorded only if nothing changed
	// while it was read (a create may race with a listing).
	epoch uint64
}

func newNames() *names { return &names{dirs: map[uint64]map[string]struct{}{}} }

// absent reports whether name is known not to exist in dir.
func (c *names) absent(dir uint64, name string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	set, ok := c.dirs[dir]
	if !ok {
		return false
	}
	_, present := set[name]
	return !present
}

// since returns the epoch to pass to known for a listing about to be read.
func (c *names) since() uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// known records dir's complete list of names, read after since returned
// epoch.
func (c *names) known(dir uint64, list []string, epoch uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch {
		return
	}
	c.dropLocked(dir)
	if c.total+len(list) > maxCachedNames {
		c.dirs, c.total = map[uint64]map[string]struct{}{}, 0
		if len(list) > maxCachedNames {
			return
		}
	}
	set := make(map[string]struct{}, len(list))
	for _, n := range list {
		set[n] = struct{}{}
	}
	c.dirs[dir] = set
	c.total += len(set)
}

// added records that name now exists in dir.
func (c *names) added(dir uint64, name string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	set, ok := c.dirs[dir]
	if !ok {
		return
	}
	if _, dup := set[name]; dup {
		return
	}
	if c.total >= maxCachedNames {
		c.dirs, c.total = map[uint64]map[string]struct{}{}, 0
		return
	}
	set[name] = struct{}{}
	c.total++
}

// removed records that name no longer exists in dir.
func (c *names) removed(dir uint64, name string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	if set, ok := c.dirs[dir]; ok {
		if _, had := set[name]; had {
			delete(set, name)
			c.total--
		}
	}
}

// forget drops dir: its names are no longer certain.
func (c *names) forget(dir uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.dropLocked(dir)
}

func (c *names) dropLocked(dir uint64) {
	if set, ok := c.dirs[dir]; ok {
		c.total -= len(set)
		delete(c.dirs, dir)
	}
}

// settled updates dir after a change of name: err == nil means the change
// happened (apply), an errno the engine gave means it did not, anything
// else (an uncertain outcome) forgets the directory.
func (c *names) settled(dir uint64, err error, apply func()) {
	if c == nil {
		return
	}
	switch {
	case err == nil:
		apply()
	case isCertainRefusal(err):
	default:
		c.forget(dir)
	}
}

// isCertainRefusal reports whether err is the engine's own answer (an
// errno it applied, or refused with), not a lost or unknown outcome.
func isCertainRefusal(err error) bool {
	var en syscall.Errno
	return errors.As(err, &en) && !errors.Is(err, client.ErrUncertain)
}
