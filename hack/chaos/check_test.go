package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cellfleet/cellfleet/hack/internal/localvolume"
)

// These tests run the checker against real files in a temporary directory
// standing in for the mount. The volume is written with the workload's own
// helpers (setup, pwrite, createOne, localvolume.WriteFileSync, syncDir, the content
// functions) and the ledger is written and read back through the ledger
// code, so a change of layout, content or encoding in the workload cannot
// leave the tests checking something the workload no longer does.

// outcome is what became of one operation of the workload.
type outcome int

const (
	acked        outcome = iota // the operation and its fsync returned 0
	failedLanded                // an error was returned, yet the change reached the volume
	failedLost                  // an error was returned and the volume never saw the change
)

// sim plays the workload against a directory: each method does what the
// workload's writer does on the volume (unless the outcome says the change
// was lost) and records the ledger events the writer records.
type sim struct {
	t        *testing.T
	mnt      string
	evs      []event
	clock    int64
	nextSlot [appenders]int
	owVer    [overwriteSlots]uint64
	creates  int
	renVer   [renameTargets]uint64
	trVer    [truncFiles]uint64
	regVal   uint64
}

func newSim(t *testing.T) *sim {
	t.Helper()
	s := &sim{t: t, mnt: t.TempDir()}
	if err := (&worker{mnt: s.mnt}).setup(); err != nil {
		t.Fatalf("setup: %v", err)
	}
	s.add(event{Kind: "ready"})
	return s
}

// clone is a copy of the history and of its volume for one subtest: the
// baseline is played once per test, its fsyncs are what takes time.
func (s *sim) clone(t *testing.T) *sim {
	t.Helper()
	c := *s
	c.t, c.mnt, c.evs = t, t.TempDir(), slices.Clone(s.evs)
	if err := os.CopyFS(c.mnt, os.DirFS(s.mnt)); err != nil {
		t.Fatal(err)
	}
	return &c
}

func (s *sim) add(e event) { s.evs = append(s.evs, e) }

// fail records an error event as worker.fail does.
func (s *sim) fail(op string) { s.add(event{Kind: "error", Op: op, Err: "EIO"}) }

func (s *sim) path(name string) string { return filepath.Join(s.mnt, name) }

func (s *sim) tick() int64 { s.clock += 10; return s.clock }

func (s *sim) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// pwriteFile writes b at off through a descriptor of its own, as the
// writers' handles do (without their fsync: the checker reads the files
// back, it never needs them on disk).
func (s *sim) pwriteFile(name string, flags int, b []byte, off int64) {
	s.t.Helper()
	f, err := os.OpenFile(s.path(name), flags, 0o644)
	s.must(err)
	s.must(pwrite(f, b, off))
	s.must(f.Close())
}

// appendRec is one attempt of appender w at its next slot; a failed one is
// retried at the same slot, as the appender does.
func (s *sim) appendRec(w int, o outcome) {
	slot := s.nextSlot[w]
	name := fmt.Sprintf("a/%d", w)
	if o == failedLost {
		// The handle's open (O_CREATE) succeeded, the pwrite did not.
		f, err := os.OpenFile(s.path(name), os.O_CREATE|os.O_RDWR, 0o644)
		s.must(err)
		s.must(f.Close())
		s.fail("append-pwrite")
		return
	}
	s.pwriteFile(name, os.O_CREATE|os.O_RDWR, appendRecord(w, slot), int64(slot)*recordSize)
	if o == failedLanded {
		s.fail("append-fsync")
		return
	}
	s.add(event{Kind: "append", Phase: "ack", W: w, Slot: slot})
	s.nextSlot[w]++
}

func (s *sim) overwrite(slot int, o outcome) uint64 {
	s.owVer[slot]++
	v := s.owVer[slot]
	s.add(event{Kind: "overwrite", Phase: "try", Slot: slot, Ver: v})
	if o == failedLost {
		s.fail("overwrite-pwrite")
		return v
	}
	s.pwriteFile("ow", os.O_RDWR, overwriteRecord(slot, v), int64(slot)*recordSize)
	if o == failedLanded {
		s.fail("overwrite-fsync")
		return v
	}
	s.add(event{Kind: "overwrite", Phase: "ack", Slot: slot, Ver: v})
	return v
}

// create is the creator's next file; it returns the name.
func (s *sim) create(o outcome) string {
	i := s.creates
	s.creates++
	name := fmt.Sprintf("c/%06d", i)
	dir := i%2 == 1
	s.add(event{Kind: "create", Phase: "try", Name: name, Dir: dir})
	if o == failedLost {
		s.fail("create")
		return name
	}
	s.must(createOne(s.path(name), fileContent(name, createSize, 0), dir))
	if o == failedLanded {
		s.fail("create") // e.g. the directory's fsync failed
		return name
	}
	s.add(event{Kind: "create", Phase: "ack", Name: name, Dir: dir})
	return name
}

func (s *sim) unlink(name string, o outcome) {
	s.add(event{Kind: "unlink", Phase: "try", Name: name})
	if o == failedLost {
		s.fail("unlink")
		return
	}
	s.must(os.Remove(s.path(name)))
	s.must(syncDir(filepath.Dir(s.path(name))))
	if o == failedLanded {
		s.fail("unlink-dirsync")
		return
	}
	s.add(event{Kind: "unlink", Phase: "ack", Name: name})
}

func (s *sim) rename(k int, o outcome) uint64 {
	s.renVer[k]++
	v := s.renVer[k]
	name := fmt.Sprintf("r/t%d", k)
	s.add(event{Kind: "rename", Phase: "try", Name: name, Ver: v})
	if o == failedLost {
		s.fail("rename-write")
		return v
	}
	tmp := s.path(fmt.Sprintf("r/tmp%d", k))
	s.must(localvolume.WriteFileSync(tmp, fileContent(name, renameSize, v)))
	s.must(os.Rename(tmp, s.path(name)))
	s.must(syncDir(s.path("r")))
	if o == failedLanded {
		s.fail("rename-dirsync")
		return v
	}
	s.add(event{Kind: "rename", Phase: "ack", Name: name, Ver: v})
	return v
}

func (s *sim) truncate(k int, size int64, o outcome) {
	s.trVer[k]++
	name := fmt.Sprintf("t/f%d", k)
	s.add(event{Kind: "truncate", Phase: "try", Name: name, Ver: s.trVer[k], Size: size})
	if o == failedLost {
		s.fail("truncate")
		return
	}
	s.must(os.Truncate(s.path(name), size))
	if o == failedLanded {
		s.fail("truncate-fsync")
		return
	}
	s.add(event{Kind: "truncate", Phase: "ack", Name: name, Ver: s.trVer[k], Size: size})
}

func (s *sim) registerWrite(k int, o outcome) uint64 {
	s.regVal++
	v := s.regVal
	s.add(event{Kind: "register", Phase: "try", W: k, Ver: v})
	call := s.tick()
	if o != failedLost {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		s.pwriteFile(fmt.Sprintf("reg/%d", k), os.O_RDWR, b[:], 0)
	}
	if o != acked {
		s.add(event{Kind: "register", Phase: "fail", W: k, Ver: v, Call: call})
		s.fail("register-write")
		return v
	}
	s.add(event{Kind: "register", Phase: "ack", W: k, Ver: v, Call: call, Ret: s.tick()})
	return v
}

// registerRead reads what the register holds on the volume, as a reader
// would.
func (s *sim) registerRead(k, reader int) uint64 {
	b, err := os.ReadFile(s.path(fmt.Sprintf("reg/%d", k)))
	s.must(err)
	v := binary.LittleEndian.Uint64(b)
	call := s.tick()
	s.add(event{Kind: "register", Phase: "ack", Read: true, W: k, Slot: reader, Ver: v, Call: call, Ret: s.tick()})
	return v
}

// state writes the events through the ledger, as the workload does, adds a
// line torn by a kill, reads the ledger back and folds it.
func (s *sim) state() *state {
	s.t.Helper()
	path := filepath.Join(s.t.TempDir(), "ledger.jsonl")
	l, err := openLedger(path)
	s.must(err)
	for _, e := range s.evs {
		l.add(e)
	}
	_, err = l.f.WriteString(`{"k":"append","p":"ac`)
	s.must(err)
	s.must(l.close())
	evs, err := loadLedger(path)
	s.must(err)
	if len(evs) != len(s.evs) {
		s.t.Fatalf("ledger round trip: %d events, wrote %d (and one torn line)", len(evs), len(s.evs))
	}
	return fold(evs)
}

func (s *sim) verify() []finding {
	s.t.Helper()
	return verify(s.mnt, "test", s.state())
}

// baseline is a history with every kind of operation, acknowledged ones
// and failed ones, both failures whose change reached the volume and
// failures whose change did not: the volume it leaves is correct.
func baseline(t *testing.T) *sim {
	t.Helper()
	s := newSim(t)

	// a/0: six acknowledged records, then a seventh written but not
	// fsynced; a/1: a failed attempt retried at the same slot; a/2: only a
	// failure, so an empty file.
	for range 6 {
		s.appendRec(0, acked)
	}
	s.appendRec(0, failedLanded)
	s.appendRec(1, acked)
	s.appendRec(1, acked)
	s.appendRec(1, failedLost)
	s.appendRec(1, acked)
	s.appendRec(2, failedLost)

	// ow slot 3: two acknowledged versions; slot 5: an acknowledged one
	// and a newer failed one that landed; slot 7: one failed write that
	// did not land; slot 9: a failed write that landed, then an
	// acknowledged one.
	s.overwrite(3, acked)
	s.overwrite(3, acked)
	s.overwrite(5, acked)
	s.overwrite(5, failedLanded)
	s.overwrite(7, failedLost)
	s.overwrite(9, failedLanded)
	s.overwrite(9, acked)

	// Creates: c/000000..1 acknowledged (without and with the directory
	// fsync), c/000002 failed and absent, c/000003 failed but complete,
	// c/000004 unlinked (acknowledged), c/000005 whose unlink failed
	// before it happened, c/000006 whose unlink failed after it happened,
	// c/000007 failed after its open: an empty file.
	s.create(acked)
	s.create(acked)
	s.create(failedLost)
	s.create(failedLanded)
	s.unlink(s.create(acked), acked)
	s.unlink(s.create(acked), failedLost)
	s.unlink(s.create(acked), failedLanded)
	empty := s.create(failedLost)
	s.must(os.WriteFile(s.path(empty), nil, 0o644))

	// r/t0: two acknowledged versions; r/t1: the second failed after the
	// rename; r/t2: only a failure before the rename; r/t3: the second
	// failed at the rename, leaving its temporary file.
	s.rename(0, acked)
	s.rename(0, acked)
	s.rename(1, acked)
	s.rename(1, failedLanded)
	s.rename(2, failedLost)
	s.rename(3, acked)
	s.rename(3, acked)
	s.renVer[3]++
	s.add(event{Kind: "rename", Phase: "try", Name: "r/t3", Ver: s.renVer[3]})
	s.must(localvolume.WriteFileSync(s.path("r/tmp3"), fileContent("r/t3", renameSize, s.renVer[3])))
	s.fail("rename")

	// t/f0: shrunk, then grown past its initial size; t/f1: cut to 0 (a
	// size the ledger's JSON omits); t/f2: a failed ftruncate that did not
	// land; t/f3: an acknowledged one, then a failed one that landed.
	s.truncate(0, 1000, acked)
	s.truncate(0, 200000, acked)
	s.truncate(1, 0, acked)
	s.truncate(2, 5000, failedLost)
	s.truncate(3, 3000, acked)
	s.truncate(3, 100, failedLanded)

	// reg/0 ends with a failed write that landed, reg/1 with one that did
	// not; readers see what the volume holds.
	s.registerWrite(0, acked)
	s.registerRead(0, 0)
	s.registerWrite(1, acked)
	s.registerRead(1, 1)
	s.registerWrite(0, failedLanded)
	s.registerRead(0, 2)
	s.registerWrite(1, failedLost)
	s.registerRead(1, 0)

	s.add(event{Kind: "error", Op: "spawn", Err: "exit"})
	s.add(event{Kind: "done", Ver: 5})
	return s
}

func TestVerifyCorrectVolume(t *testing.T) {
	t.Parallel()
	s := baseline(t)
	st := s.state()
	if got := verify(s.mnt, "test", st); len(got) != 0 {
		t.Fatalf("a correct volume has findings:\n%s", fmtFindings(got))
	}
	// The fold the verdict rests on: what the baseline acknowledged.
	if st.appended != [appenders]int{6, 3, 0} {
		t.Errorf("appended = %v, want [6 3 0]", st.appended)
	}
	if st.owAck[3] != 2 || st.owAck[5] != 1 || st.owAck[7] != 0 || st.owAck[9] != 2 {
		t.Errorf("acknowledged overwrites of slots 3 5 7 9 = %d %d %d %d, want 2 1 0 2",
			st.owAck[3], st.owAck[5], st.owAck[7], st.owAck[9])
	}
	if c := st.creates["c/000004"]; c == nil || !c.acked || !c.unlinkAcked {
		t.Errorf("c/000004: %+v, want an acknowledged create and unlink", c)
	}
	if st.trAck["t/f1"] != [2]int64{1, 0} {
		t.Errorf("t/f1 acknowledged = %v, want v1 to 0 bytes", st.trAck["t/f1"])
	}
	if !st.done || st.spawned != 5 || st.errs["EIO"] == 0 || st.errsByOp["spawn exit"] != 1 {
		t.Errorf("done=%v spawned=%d errs=%v byOp=%v", st.done, st.spawned, st.errs, st.errsByOp)
	}
	// The register history of a correct volume is linearizable too.
	var lin []finding
	if _, err := checkLinearizable(st, nil, t.TempDir(), collect(&lin)); err != nil || len(lin) != 0 {
		t.Errorf("register history: err %v, findings:\n%s", err, fmtFindings(lin))
	}
}

// TestVerifyReportsDefects damages the correct volume in one way each and
// expects exactly that damage to be reported.
func TestVerifyReportsDefects(t *testing.T) {
	t.Parallel()
	base := baseline(t)
	for _, tc := range []struct {
		name   string
		damage func(s *sim)
		kind   string
		object string
		detail []string // substrings of the finding's detail
	}{{
		// The symptom the nemesis hunts: a record whose fsync succeeded
		// reads back as zeros.
		name: "acknowledged append record zeroed",
		damage: func(s *sim) {
			s.pwriteFile("a/0", os.O_RDWR, make([]byte, recordSize), 2*recordSize)
		},
		kind: "append", object: "a/0 slot 2", detail: []string{"offset 8192", "all zero bytes"},
	}, {
		name:   "acknowledged tail record missing",
		damage: func(s *sim) { s.must(os.Truncate(s.path("a/0"), 5*recordSize)) },
		kind:   "append", object: "a/0 slot 5", detail: []string{"file ends at 20480 bytes", "records 5..5"},
	}, {
		name:   "appended file missing",
		damage: func(s *sim) { s.must(os.Remove(s.path("a/1"))) },
		kind:   "append", object: "a/1", detail: []string{"unreadable with 3 acknowledged records"},
	}, {
		// The other symptom: a created file whose fsync succeeded is empty.
		name:   "acknowledged created file empty",
		damage: func(s *sim) { s.must(os.Truncate(s.path("c/000001"), 0)) },
		kind:   "create", object: "c/000001", detail: []string{"directory", "is empty (want 1024 bytes)"},
	}, {
		name:   "acknowledged created file missing",
		damage: func(s *sim) { s.must(os.Remove(s.path("c/000000"))) },
		kind:   "create", object: "c/000000", detail: []string{"is missing"},
	}, {
		name: "acknowledged created file torn",
		damage: func(s *sim) {
			s.pwriteFile("c/000000", os.O_RDWR, make([]byte, 512), 512)
		},
		kind: "create", object: "c/000000", detail: []string{"first difference at byte 512"},
	}, {
		name: "unacknowledged create holding foreign data",
		damage: func(s *sim) {
			s.must(os.WriteFile(s.path("c/000002"), fileContent("c/000003", createSize, 0), 0o644))
		},
		kind: "create", object: "c/000002", detail: []string{"unacknowledged create"},
	}, {
		name: "acknowledged unlink, file still there",
		damage: func(s *sim) {
			s.must(os.WriteFile(s.path("c/000004"), fileContent("c/000004", createSize, 0), 0o644))
		},
		kind: "unlink", object: "c/000004", detail: []string{"yet the name exists (1024 bytes)"},
	}, {
		name: "overwrite rolled back to an older acknowledged version",
		damage: func(s *sim) {
			s.pwriteFile("ow", os.O_RDWR, overwriteRecord(3, 1), 3*recordSize)
		},
		kind: "overwrite", object: "ow slot 3", detail: []string{"last acknowledged version v2", `holds "overwrite" a=0 b=3 v1`},
	}, {
		// Slot 5 has a newer failed version: that one is accepted (the
		// correct volume holds it), the initial one is not.
		name: "overwrite rolled back below the acknowledged version under a newer failed one",
		damage: func(s *sim) {
			s.pwriteFile("ow", os.O_RDWR, overwriteRecord(5, 0), 5*recordSize)
		},
		kind: "overwrite", object: "ow slot 5", detail: []string{"last acknowledged version v1", "v0"},
	}, {
		name: "overwrite holding a version never written",
		damage: func(s *sim) {
			s.pwriteFile("ow", os.O_RDWR, overwriteRecord(7, 2), 7*recordSize)
		},
		kind: "overwrite", object: "ow slot 7", detail: []string{"last acknowledged version v0", "v2"},
	}, {
		name: "overwrite slot holding another slot's record",
		damage: func(s *sim) {
			s.pwriteFile("ow", os.O_RDWR, overwriteRecord(4, 2), 9*recordSize)
		},
		kind: "overwrite", object: "ow slot 9", detail: []string{"last acknowledged version v2", "b=4"},
	}, {
		name: "rename target holding an older version",
		damage: func(s *sim) {
			s.must(os.WriteFile(s.path("r/t0"), fileContent("r/t0", renameSize, 1), 0o644))
		},
		kind: "rename", object: "r/t0", detail: []string{"last acknowledged rename v2", "v1, first difference"},
	}, {
		name: "rename target holding a version never tried",
		damage: func(s *sim) {
			s.must(os.WriteFile(s.path("r/t0"), fileContent("r/t0", renameSize, 3), 0o644))
		},
		kind: "rename", object: "r/t0", detail: []string{"last acknowledged rename v2", "v3"},
	}, {
		name:   "acknowledged rename target missing",
		damage: func(s *sim) { s.must(os.Remove(s.path("r/t1"))) },
		kind:   "rename", object: "r/t1", detail: []string{"acknowledged rename of v1: target unreadable"},
	}, {
		name:   "truncated file back at an older acknowledged size",
		damage: func(s *sim) { s.must(os.Truncate(s.path("t/f0"), 1000)) },
		kind:   "truncate", object: "t/f0", detail: []string{"size 1000, last acknowledged ftruncate v2 to 200000 bytes"},
	}, {
		name:   "truncated file at a size never set",
		damage: func(s *sim) { s.must(os.Truncate(s.path("t/f1"), 4096)) },
		kind:   "truncate", object: "t/f1", detail: []string{"size 4096, last acknowledged ftruncate v1 to 0 bytes"},
	}, {
		name: "untruncated bytes of a truncated file damaged",
		damage: func(s *sim) {
			s.pwriteFile("t/f0", os.O_RDWR, make([]byte, 8), 992)
		},
		kind: "truncate", object: "t/f0", detail: []string{"the first 1000 bytes", "first difference at byte 992"},
	}, {
		// t/f0 was cut to 1000 bytes, then grown: from byte 1000 on it
		// reads zeros. The initial data back there means the acknowledged
		// cut was lost, though the size is right.
		name: "acknowledged shrink lost under a later growth",
		damage: func(s *sim) {
			s.pwriteFile("t/f0", os.O_RDWR, fileContent("t/f0", truncInitial, 0)[1000:], 1000)
		},
		kind: "truncate", object: "t/f0", detail: []string{"not all zero from byte 1000 on", "acknowledged size (ftruncate or the initial one) was 1000 bytes"},
	}, {
		name: "data beyond an extension",
		damage: func(s *sim) {
			s.pwriteFile("t/f0", os.O_RDWR, []byte{1}, 150000)
		},
		kind: "truncate", object: "t/f0", detail: []string{"from byte 1000"},
	}, {
		name: "register rolled back",
		damage: func(s *sim) {
			s.pwriteFile("reg/1", os.O_RDWR, make([]byte, 8), 0)
		},
		kind: "register", object: "reg/1", detail: []string{"holds 0, last acknowledged write 2"},
	}, {
		name: "register holding a value written to the other register",
		damage: func(s *sim) {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], 4) // reg/1's failed write
			s.pwriteFile("reg/0", os.O_RDWR, b[:], 0)
		},
		kind: "register", object: "reg/0", detail: []string{"holds 4, last acknowledged write 1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := base.clone(t)
			tc.damage(s)
			expectOnly(t, s.verify(), tc.kind, tc.object, tc.detail...)
		})
	}
}

// TestVerifyAcceptsFailedVersions: a failed operation may have taken
// effect even when the correct volume of the baseline does not show it
// (an error does not say the change did not happen), so its version is
// accepted wherever it is newer than the last acknowledged one.
func TestVerifyAcceptsFailedVersions(t *testing.T) {
	t.Parallel()
	base := baseline(t)
	for _, tc := range []struct {
		name   string
		change func(s *sim)
	}{{
		name:   "append record of a failed attempt beyond the acknowledged ones",
		change: func(s *sim) { s.pwriteFile("a/1", os.O_RDWR, appendRecord(1, 3), 3*recordSize) },
	}, {
		name:   "overwrite whose pwrite failed",
		change: func(s *sim) { s.pwriteFile("ow", os.O_RDWR, overwriteRecord(7, 1), 7*recordSize) },
	}, {
		name: "create whose write failed",
		change: func(s *sim) {
			s.must(os.WriteFile(s.path("c/000002"), fileContent("c/000002", createSize, 0), 0o644))
		},
	}, {
		name:   "create whose unlink failed",
		change: func(s *sim) { s.must(os.Remove(s.path("c/000005"))) },
	}, {
		name:   "rename that returned an error",
		change: func(s *sim) { s.must(os.Rename(s.path("r/tmp3"), s.path("r/t3"))) },
	}, {
		name:   "ftruncate that returned an error",
		change: func(s *sim) { s.must(os.Truncate(s.path("t/f2"), 5000)) },
	}, {
		name: "register write that returned an error",
		change: func(s *sim) {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], 4)
			s.pwriteFile("reg/1", os.O_RDWR, b[:], 0)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := base.clone(t)
			tc.change(s)
			if got := s.verify(); len(got) != 0 {
				t.Fatalf("a failed operation's version is reported:\n%s", fmtFindings(got))
			}
		})
	}
}

// TestVerifyFailedOperationsNotRequired: an operation that only failed (a
// try without an ack, or just an error event) need not be on the volume;
// the same operations acknowledged must be.
func TestVerifyFailedOperationsNotRequired(t *testing.T) {
	t.Parallel()
	history := func(t *testing.T, o outcome) *sim {
		s := newSim(t)
		s.appendRec(0, o)
		s.overwrite(10, o)
		s.create(o)
		s.rename(0, o)
		s.truncate(0, 10, o)
		s.registerWrite(1, o)
		return s
	}
	t.Run("failed", func(t *testing.T) {
		s := history(t, failedLost)
		if got := s.verify(); len(got) != 0 {
			t.Fatalf("failed operations that did not land are reported:\n%s", fmtFindings(got))
		}
	})
	t.Run("failed but landed", func(t *testing.T) {
		s := history(t, failedLanded)
		if got := s.verify(); len(got) != 0 {
			t.Fatalf("failed operations that landed are reported:\n%s", fmtFindings(got))
		}
	})
	t.Run("only error events", func(t *testing.T) {
		s := newSim(t)
		for _, op := range []string{"append-open", "overwrite-open", "create", "truncate-open", "register-open", "register-read"} {
			s.fail(op)
		}
		if got := s.verify(); len(got) != 0 {
			t.Fatalf("error events alone are reported:\n%s", fmtFindings(got))
		}
	})
	t.Run("acknowledged but not on the volume", func(t *testing.T) {
		// The same ledger with acks, against the volume of the failed
		// history: every operation is reported once.
		lost := history(t, failedLost)
		lost.evs = history(t, acked).evs
		got := lost.verify()
		want := []string{
			"append a/0 slot 0", "create c/000000", "overwrite ow slot 10",
			"register reg/1", "rename r/t0", "truncate t/f0",
		}
		var names []string
		for _, f := range got {
			names = append(names, f.Kind+" "+f.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			t.Fatalf("findings %q, want %q:\n%s", names, want, fmtFindings(got))
		}
	})
}

// TestInjectLossIsReported: the --inject-loss self-test damages the
// volume through injectLoss; the check must report exactly its two
// damages.
func TestInjectLossIsReported(t *testing.T) {
	t.Parallel()
	s := baseline(t)
	st := s.state()
	if err := injectLoss(s.mnt, st); err != nil {
		t.Fatal(err)
	}
	got := verify(s.mnt, "test", st)
	// a/0 has 6 acknowledged records: slot 3 is zeroed; of the creates
	// acknowledged and never unlinked (c/000000, c/000001) the second is
	// emptied.
	if len(got) != 2 ||
		got[0].Kind != "append" || got[0].Name != "a/0 slot 3" ||
		got[1].Kind != "create" || got[1].Name != "c/000001" || !strings.Contains(got[1].Detail, "is empty") {
		t.Fatalf("want a/0 slot 3 zeroed and c/000001 empty, got:\n%s", fmtFindings(got))
	}
}

func expectOnly(t *testing.T, got []finding, kind, name string, detail ...string) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("want exactly one finding (%s %s), got %d:\n%s", kind, name, len(got), fmtFindings(got))
	}
	f := got[0]
	if f.Phase != "test" || f.Kind != kind || f.Name != name {
		t.Fatalf("want %s %s, got:\n%s", kind, name, fmtFindings(got))
	}
	for _, d := range detail {
		if !strings.Contains(f.Detail, d) {
			t.Errorf("detail %q does not say %q", f.Detail, d)
		}
	}
}

func collect(out *[]finding) adder {
	return func(kind, name, format string, args ...any) {
		*out = append(*out, finding{Phase: "test", Kind: kind, Name: name, Detail: fmt.Sprintf(format, args...)})
	}
}

func fmtFindings(fs []finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "\t[%s] %s %s: %s\n", f.Phase, f.Kind, f.Name, f.Detail)
	}
	if len(fs) == 0 {
		b.WriteString("\t(none)\n")
	}
	return b.String()
}
