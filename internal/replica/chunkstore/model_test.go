package chunkstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// model is what the files hold: their bytes, sizes included.
type model map[uint64][]byte

func (m model) clone() model {
	c := model{}
	for ino, b := range m {
		c[ino] = append([]byte(nil), b...)
	}
	return c
}

func (m model) write(ino uint64, p []byte, off uint64) {
	b := m[ino]
	if end := off + uint64(len(p)); end > uint64(len(b)) {
		b = append(b, make([]byte, end-uint64(len(b)))...)
	}
	copy(b[off:], p)
	m[ino] = b
}

func (m model) truncate(ino, size uint64) {
	b := m[ino]
	if size <= uint64(len(b)) {
		m[ino] = b[:size]
		return
	}
	m[ino] = append(b, make([]byte, size-uint64(len(b)))...)
}

func (m model) punch(ino, off, n uint64) {
	b := m[ino]
	for i := off; i < off+n && i < uint64(len(b)); i++ {
		b[i] = 0
	}
}

// randomRun applies a seeded sequence of writes, truncates, punches,
// removals, captures, persists and reopenings to a store and to the model,
// and checks that every read, live or through a capture, matches.
type randomRun struct {
	t      *testing.T
	rng    *rand.Rand
	seed   uint64
	dir    string
	s      *Store
	live   model
	caps   map[*Capture]model
	stored map[uint64]model // persisted captures by manifest ID
}

func TestRandomOperationsMatchAnInMemoryModel(t *testing.T) {
	seeds := []uint64{1, 2, uint64(time.Now().UnixNano())}
	if env := os.Getenv("CHUNKSTORE_SEED"); env != "" {
		v, err := strconv.ParseUint(env, 10, 64)
		if err != nil {
			t.Fatalf("CHUNKSTORE_SEED: %v", err)
		}
		seeds = []uint64{v}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := &randomRun{t: t, rng: rand.New(rand.NewPCG(seed, seed)), seed: seed, dir: t.TempDir(),
				live: model{}, caps: map[*Capture]model{}, stored: map[uint64]model{}}
			r.s = open(t, r.dir, Options{Retain: 2})
			for step := range 300 {
				r.step(step)
			}
			r.checkAll("end")
		})
	}
}

func (r *randomRun) failf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d (rerun with CHUNKSTORE_SEED=%d): %s", r.seed, r.seed, fmt.Sprintf(format, args...))
}

func (r *randomRun) step(step int) {
	ino := 1 + r.rng.Uint64N(4)
	span := uint64(6 * testChunk)
	off := r.rng.Uint64N(span)
	var err error
	switch op := r.rng.IntN(100); {
	case op < 50:
		p := fill(1+r.rng.IntN(2*testChunk), byte(step))
		if r.rng.IntN(4) == 0 { // a whole, aligned chunk
			p, off = fill(testChunk, byte(step)), off/testChunk*testChunk
		}
		err = r.s.WriteAt(ino, p, off)
		r.live.write(ino, p, off)
	case op < 60:
		err = r.s.Truncate(ino, off)
		r.live.truncate(ino, off)
	case op < 70:
		n := r.rng.Uint64N(2 * testChunk)
		err = r.s.Punch(ino, off, n)
		r.live.punch(ino, off, n)
	case op < 73:
		err = r.s.Remove(ino)
		delete(r.live, ino)
	case op < 82:
		r.caps[r.s.Capture(uint64(step))] = r.live.clone()
	case op < 92:
		r.persistOrRelease()
	case op < 94:
		r.reopen()
	case op < 96:
		r.restore()
	case op < 97:
		r.rebuild(step)
	default:
		r.checkAll(fmt.Sprintf("step %d", step))
	}
	if err != nil {
		r.failf("step %d: %v", step, err)
	}
	r.checkFile(fmt.Sprintf("after step %d", step), ino)
}

// persistOrRelease persists or releases one capture at random.
func (r *randomRun) persistOrRelease() {
	for c, m := range r.caps {
		if r.rng.IntN(2) == 0 {
			man, err := r.s.Persist(c)
			if err != nil {
				r.failf("persist: %v", err)
			}
			r.stored[man.ID] = m
		}
		c.Release()
		delete(r.caps, c)
		return
	}
}

// reopen closes the store and opens it again: the live state becomes the
// newest kept manifest's.
func (r *randomRun) reopen() {
	for c := range r.caps {
		c.Release()
		delete(r.caps, c)
	}
	r.s.Close()
	s, err := Open(r.dir, Options{Retain: 2})
	if err != nil {
		r.failf("reopen: %v", err)
	}
	r.s = s
	r.live = model{}
	if ids := s.Manifests(); len(ids) > 0 {
		r.live = r.stored[ids[len(ids)-1]].clone()
	}
	if len(s.Refused()) > 0 {
		r.failf("reopen refused %v", s.Refused())
	}
}

// restore makes a kept manifest, at random, the live state.
func (r *randomRun) restore() {
	ids := r.s.Manifests()
	if len(ids) == 0 {
		return
	}
	id := ids[r.rng.IntN(len(ids))]
	if err := r.s.Restore(id); err != nil {
		r.failf("restore %d: %v", id, err)
	}
	r.live = r.stored[id].clone()
}

// rebuild makes the store a follower rebuilt from a peer: the peer takes
// some of the live files and changes one chunk of each, persists, and the
// store installs what it lacks and adopts the peer's manifest.
func (r *randomRun) rebuild(step int) {
	peer, err := Open(r.t.TempDir(), Options{ChunkSize: testChunk})
	if err != nil {
		r.failf("open the peer: %v", err)
	}
	defer peer.Close()
	want := model{}
	for ino, b := range r.live {
		b = append([]byte(nil), b...)
		if len(b) > 0 {
			b[r.rng.IntN(len(b))] ^= 0xff
		}
		if err := peer.WriteAt(ino, b, 0); err != nil {
			r.failf("peer write: %v", err)
		}
		want[ino] = b
	}
	c := peer.Capture(uint64(step))
	defer c.Release()
	m, err := peer.Persist(c)
	if err != nil {
		r.failf("peer persist: %v", err)
	}
	for _, e := range r.s.Missing(m) {
		v, _ := peer.OpenManifest(m.ID)
		data, err := v.ReadChunk(e.Ino, e.Index)
		v.Release()
		if err == nil {
			err = r.s.Install(m, e, data)
		}
		if err != nil {
			r.failf("send chunk %d of inode %d: %v", e.Index, e.Ino, err)
		}
	}
	local, err := r.s.Adopt(m)
	if err != nil {
		r.failf("adopt: %v", err)
	}
	r.live = want
	r.stored[local.ID] = want.clone()
}

func (r *randomRun) checkFile(when string, ino uint64) {
	r.t.Helper()
	want := r.live[ino]
	// Bytes past the size read as zeros: a truncate dropped them.
	got := make([]byte, len(want)+testChunk)
	if err := r.s.ReadAt(ino, got, 0); err != nil {
		r.failf("%s: read inode %d: %v", when, ino, err)
	}
	r.compare(when, "live", ino, got, want)
}

func (r *randomRun) compare(when, what string, ino uint64, got, want []byte) {
	r.t.Helper()
	padded := append(want[:len(want):len(want)], make([]byte, len(got)-len(want))...)
	if bytes.Equal(got, padded) {
		return
	}
	for i := range got {
		if got[i] != padded[i] {
			r.failf("%s: %s inode %d (size %d) byte %d is %#x, want %#x", when, what, ino, len(want), i, got[i], padded[i])
		}
	}
}

func (r *randomRun) checkAll(when string) {
	r.t.Helper()
	for ino := uint64(1); ino <= 4; ino++ {
		r.checkFile(when, ino)
		for c, m := range r.caps {
			got := make([]byte, len(m[ino]))
			if err := c.ReadAt(ino, got, 0); err != nil {
				r.failf("%s: read capture %d inode %d: %v", when, c.ID(), ino, err)
			}
			r.compare(when, fmt.Sprintf("capture %d", c.ID()), ino, got, m[ino])
		}
	}
	if err := r.s.Collect(); err != nil {
		r.failf("%s: collect: %v", when, err)
	}
	if got, want := chunkFiles(r.t, r.dir), referenced(r.s); names(got) != names(want) {
		r.failf("%s: chunk files on disk %v, referenced %v", when, got, want)
	}
}
