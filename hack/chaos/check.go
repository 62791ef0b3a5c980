package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// finding is one acknowledged operation the volume does not reflect.
type finding struct {
	Phase  string `json:"phase"` // which verification found it
	Kind   string `json:"kind"`  // the workload: append, overwrite, create, ...
	Name   string `json:"name"`  // file (and slot)
	Detail string `json:"detail"`
}

// state is the ledger folded per object: what was acknowledged last and
// which later versions were tried (and so may legitimately be found).
type state struct {
	appended  [appenders]int // acknowledged records per appender (slots 0..n-1)
	owAck     [overwriteSlots]uint64
	owTried   [overwriteSlots]map[uint64]bool
	creates   map[string]*createState
	renAck    map[string]uint64
	renTried  map[string]map[uint64]bool
	trAck     map[string][2]int64 // version, size
	trTried   map[string]map[int64]int64
	trMin     map[string]int64 // smallest size ever tried: the initial content survives below it
	trAckMin  map[string]int64 // smallest size ever acknowledged (or the initial one): zeros from there on
	regAck    [registers]uint64
	regAckAt  [registers]int64
	regTried  [registers]map[uint64]bool
	registerH []event
	acked     map[string]int
	errs      map[string]int
	errsByOp  map[string]int // "op errno"
	spawned   uint64
	done      bool
}

type createState struct {
	acked, dir, unlinkTried, unlinkAcked bool
}

func fold(evs []event) *state {
	st := &state{creates: map[string]*createState{}, renAck: map[string]uint64{}, renTried: map[string]map[uint64]bool{},
		trAck: map[string][2]int64{}, trTried: map[string]map[int64]int64{}, trMin: map[string]int64{}, trAckMin: map[string]int64{},
		acked: map[string]int{}, errs: map[string]int{}, errsByOp: map[string]int{}}
	for i := range st.owTried {
		st.owTried[i] = map[uint64]bool{}
	}
	for i := range st.regTried {
		st.regTried[i] = map[uint64]bool{}
	}
	for k := range truncFiles {
		name := fmt.Sprintf("t/f%d", k)
		st.trAck[name] = [2]int64{0, truncInitial}
		st.trTried[name] = map[int64]int64{}
		st.trMin[name] = truncInitial
		st.trAckMin[name] = truncInitial
	}
	for _, e := range evs {
		if e.Phase == "ack" {
			k := e.Kind
			if e.Kind == "register" && e.Read {
				k = "register-read"
			}
			st.acked[k]++
		}
		switch e.Kind {
		case "error":
			st.errs[e.Err]++
			st.errsByOp[e.Op+" "+e.Err]++
		case "done":
			st.done, st.spawned = true, e.Ver
		case "append":
			st.appended[e.W] = max(st.appended[e.W], e.Slot+1)
		case "overwrite":
			if e.Phase == "try" {
				st.owTried[e.Slot][e.Ver] = true
			} else {
				st.owAck[e.Slot] = e.Ver
			}
		case "create", "unlink":
			c := st.creates[e.Name]
			if c == nil {
				c = &createState{}
				st.creates[e.Name] = c
			}
			switch {
			case e.Kind == "create" && e.Phase == "ack":
				c.acked, c.dir = true, e.Dir
			case e.Kind == "unlink" && e.Phase == "try":
				c.unlinkTried = true
			case e.Kind == "unlink" && e.Phase == "ack":
				c.unlinkAcked = true
			}
		case "rename":
			if st.renTried[e.Name] == nil {
				st.renTried[e.Name] = map[uint64]bool{}
			}
			if e.Phase == "try" {
				st.renTried[e.Name][e.Ver] = true
			} else {
				st.renAck[e.Name] = e.Ver
			}
		case "truncate":
			if e.Phase == "try" {
				st.trTried[e.Name][int64(e.Ver)] = e.Size
				st.trMin[e.Name] = min(st.trMin[e.Name], e.Size)
			} else {
				st.trAck[e.Name] = [2]int64{int64(e.Ver), e.Size}
				st.trAckMin[e.Name] = min(st.trAckMin[e.Name], e.Size)
			}
		case "register":
			switch {
			case e.Phase == "try":
				st.regTried[e.W][e.Ver] = true
			case e.Phase == "ack" && !e.Read:
				st.regAck[e.W], st.regAckAt[e.W] = e.Ver, e.Ret
				st.registerH = append(st.registerH, e)
			default:
				st.registerH = append(st.registerH, e)
			}
		}
	}
	return st
}

// verify reads every object of the ledger through the mount.
func verify(mnt, phase string, st *state) []finding {
	var out []finding
	add := func(kind, name, format string, args ...any) {
		out = append(out, finding{Phase: phase, Kind: kind, Name: name, Detail: fmt.Sprintf(format, args...)})
	}
	for w := range appenders {
		name := fmt.Sprintf("a/%d", w)
		b, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil {
			if st.appended[w] > 0 {
				add("append", name, "unreadable with %d acknowledged records: %v", st.appended[w], err)
			}
			continue
		}
		bad := 0
		for s := 0; s < st.appended[w]; s++ {
			want := appendRecord(w, s)
			off := s * recordSize
			if off+recordSize > len(b) {
				add("append", fmt.Sprintf("%s slot %d", name, s), "file ends at %d bytes: acknowledged records %d..%d are beyond it",
					len(b), s, st.appended[w]-1)
				break
			}
			if got := b[off : off+recordSize]; !bytes.Equal(got, want) {
				if bad++; bad <= 20 {
					add("append", fmt.Sprintf("%s slot %d", name, s), "acknowledged record at offset %d %s", off, describe(got, want))
				}
			}
		}
		if bad > 20 {
			add("append", name, "%d more acknowledged records differ (of %d)", bad-20, st.appended[w])
		}
	}
	verifyOverwrites(mnt, st, add)
	verifyCreates(mnt, st, add)
	verifyRenames(mnt, st, add)
	verifyTruncates(mnt, st, add)
	verifyRegisters(mnt, st, add)
	return out
}

type adder func(kind, name, format string, args ...any)

func verifyOverwrites(mnt string, st *state, add adder) {
	b, err := os.ReadFile(filepath.Join(mnt, "ow"))
	if err != nil {
		add("overwrite", "ow", "unreadable: %v", err)
		return
	}
	for s := range overwriteSlots {
		name := fmt.Sprintf("ow slot %d", s)
		off := s * recordSize
		if off+recordSize > len(b) {
			add("overwrite", name, "file ends at %d bytes", len(b))
			return
		}
		got := b[off : off+recordSize]
		ack := st.owAck[s]
		if bytes.Equal(got, overwriteRecord(s, ack)) {
			continue
		}
		_, _, slot, v, ok := parseHeader(got)
		if ok && slot == s && v > ack && st.owTried[s][v] && bytes.Equal(got, overwriteRecord(s, v)) {
			continue // a newer write whose fsync failed: it may have landed
		}
		add("overwrite", name, "last acknowledged version v%d: %s", ack, describe(got, overwriteRecord(s, ack)))
	}
}

func verifyCreates(mnt string, st *state, add adder) {
	names := make([]string, 0, len(st.creates))
	for n := range st.creates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := st.creates[n]
		want := fileContent(n, createSize, 0)
		b, err := os.ReadFile(filepath.Join(mnt, n))
		exists := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			if c.acked && !c.unlinkAcked {
				add("create", n, "unreadable: %v", err)
			}
			continue
		}
		how := "fsync of the file"
		if c.dir {
			how = "fsync of the file and of the directory"
		}
		switch {
		case c.unlinkAcked && exists:
			add("unlink", n, "acknowledged unlink (and directory fsync), yet the name exists (%d bytes)", len(b))
		case c.unlinkAcked:
		case c.acked && !exists && !c.unlinkTried:
			add("create", n, "acknowledged create (%s) is missing", how)
		case c.acked && exists && !bytes.Equal(b, want):
			add("create", n, "acknowledged create (%s): %s", how, describe(b, want))
		case !c.acked && exists && len(b) != 0 && !bytes.Equal(b, want):
			add("create", n, "unacknowledged create holds neither nothing nor its data: %s", describe(b, want))
		}
	}
}

func verifyRenames(mnt string, st *state, add adder) {
	for name, tried := range st.renTried {
		ack := st.renAck[name]
		b, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil {
			if ack > 0 {
				add("rename", name, "acknowledged rename of v%d: target unreadable: %v", ack, err)
			}
			continue
		}
		want := fileContent(name, renameSize, ack)
		if ack > 0 && bytes.Equal(b, want) {
			continue
		}
		_, _, _, v, ok := parseHeader(b)
		if ok && v > ack && tried[v] && bytes.Equal(b, fileContent(name, renameSize, v)) {
			continue
		}
		add("rename", name, "last acknowledged rename v%d: %s", ack, describe(b, want))
	}
}

func verifyTruncates(mnt string, st *state, add adder) {
	for name, ack := range st.trAck {
		b, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil {
			add("truncate", name, "unreadable: %v", err)
			continue
		}
		size := int64(len(b))
		ok := size == ack[1]
		for v, s := range st.trTried[name] {
			if v > ack[0] && s == size {
				ok = true
			}
		}
		if !ok {
			add("truncate", name, "size %d, last acknowledged ftruncate v%d to %d bytes (and no later one tried that size)", size, ack[0], ack[1])
		}
		keep := min(st.trMin[name], size)
		if want := fileContent(name, truncInitial, 0)[:keep]; !bytes.Equal(b[:keep], want) {
			add("truncate", name, "the first %d bytes (never truncated away) %s", keep, describe(b[:keep], want))
		}
		// Only ftruncate touches these files: once a size of n bytes was
		// acknowledged, every byte from n on reads zero whatever the later
		// sizes, so a lost cut shows here even when the size is right (a
		// wrong size is reported already).
		if z := min(st.trAckMin[name], size); ok && !isZero(b[z:]) {
			add("truncate", name, "not all zero from byte %d on, yet an acknowledged size (ftruncate or the initial one) was %d bytes",
				z, st.trAckMin[name])
		}
	}
}

// describe says how a page differs from what was acknowledged.
func describe(got, want []byte) string {
	switch {
	case len(got) == 0:
		return fmt.Sprintf("is empty (want %d bytes)", len(want))
	case isZero(got):
		return fmt.Sprintf("is all zero bytes (%d bytes)", len(got))
	}
	if kind, a, c, v, ok := parseHeader(got); ok {
		if len(got) != len(want) {
			return fmt.Sprintf("holds %q a=%d b=%d v%d, %d bytes (want %d bytes)", kind, a, c, v, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				return fmt.Sprintf("holds %q a=%d b=%d v%d, first difference at byte %d", kind, a, c, v, i)
			}
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("has %d bytes, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			zero := isZero(got[i:])
			return fmt.Sprintf("first difference at byte %d (rest zero: %v)", i, zero)
		}
	}
	return "matches"
}
