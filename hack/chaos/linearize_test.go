package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Register histories as the workload records them (a try, then an ack
// with the write's interval or a fail with only its call time; reads are
// acks with Read set), folded and checked with checkLinearizable. Times
// are small numbers: only their order matters.

func regWrite(k int, v uint64, call, ret int64) []event {
	return []event{
		{Kind: "register", Phase: "try", W: k, Ver: v},
		{Kind: "register", Phase: "ack", W: k, Ver: v, Call: call, Ret: ret},
	}
}

// regWriteFailed is a write whose pwrite or fsync failed: its outcome is
// unknown.
func regWriteFailed(k int, v uint64, call int64) []event {
	return []event{
		{Kind: "register", Phase: "try", W: k, Ver: v},
		{Kind: "register", Phase: "fail", W: k, Ver: v, Call: call},
		{Kind: "error", Op: "register-write", Err: "EIO"},
	}
}

func regRead(k, reader int, v uint64, call, ret int64) []event {
	return []event{{Kind: "register", Phase: "ack", Read: true, W: k, Slot: reader, Ver: v, Call: call, Ret: ret}}
}

func history(parts ...[]event) []event {
	var out []event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestCheckLinearizable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		evs     []event
		cuts    []int64 // mount-owner kills
		checked int
		illegal string // the epoch reported, "" if linearizable
	}{{
		name: "sequential writes and reads",
		evs: history(
			regRead(0, 0, 0, 1, 2),
			regWrite(0, 1, 10, 20), regRead(0, 0, 1, 25, 30),
			regWrite(0, 2, 40, 50), regRead(0, 1, 2, 55, 60),
		),
		checked: 5,
	}, {
		name: "reads concurrent with a write see the old or the new value",
		evs: history(
			regWrite(0, 1, 10, 20),
			regWrite(0, 2, 30, 60),
			regRead(0, 0, 1, 35, 40), regRead(0, 1, 2, 45, 50), regRead(0, 2, 2, 70, 80),
		),
		checked: 5,
	}, {
		name: "a failed write may take effect at any later time",
		evs: history(
			regWrite(0, 1, 10, 20),
			regWriteFailed(0, 2, 30),
			regRead(0, 0, 1, 100, 110), regRead(0, 1, 2, 200, 210), regRead(0, 2, 2, 300, 310),
		),
		checked: 5,
	}, {
		name: "registers are independent",
		evs: history(
			regWrite(0, 1, 10, 20), regWrite(1, 2, 30, 40),
			regRead(0, 0, 1, 50, 60), regRead(1, 1, 2, 50, 60),
		),
		checked: 4,
	}, {
		name: "a read returning a value never written",
		evs: history(
			regWrite(0, 1, 10, 20),
			regRead(0, 0, 7, 30, 40),
		),
		checked: 2, illegal: "epoch 0",
	}, {
		name: "a stale read after an acknowledged write finished",
		evs: history(
			regWrite(0, 1, 10, 20), regWrite(0, 2, 30, 40),
			regRead(0, 0, 1, 50, 60),
		),
		checked: 3, illegal: "epoch 0",
	}, {
		name: "a read going back after a failed write was seen",
		evs: history(
			regWrite(0, 1, 10, 20), regWriteFailed(0, 2, 30),
			regRead(0, 0, 2, 40, 50), regRead(0, 1, 1, 60, 70),
		),
		checked: 4, illegal: "epoch 0",
	}, {
		name: "a read returning the other register's value",
		evs: history(
			regWrite(0, 1, 10, 20), regWrite(1, 2, 30, 40),
			regRead(0, 0, 2, 50, 60),
		),
		checked: 3, illegal: "epoch 0",
	}, {
		// After a mount-owner kill the new mount's first read tells what
		// the register holds (durability is verifyRegisters' job).
		name: "a mount-owner kill starts an epoch of unknown state",
		evs: history(
			regWrite(0, 1, 10, 20), regWrite(0, 2, 30, 40),
			regRead(0, 0, 1, 110, 120), regRead(0, 0, 1, 130, 140),
		),
		cuts:    []int64{100},
		checked: 4,
	}, {
		name: "the same history without the kill",
		evs: history(
			regWrite(0, 1, 10, 20), regWrite(0, 2, 30, 40),
			regRead(0, 0, 1, 110, 120), regRead(0, 0, 1, 130, 140),
		),
		checked: 4, illegal: "epoch 0",
	}, {
		name: "a stale read within the epoch after a kill",
		evs: history(
			regWrite(0, 1, 10, 20),
			regRead(0, 0, 1, 110, 120), regWrite(0, 2, 130, 140), regRead(0, 0, 1, 150, 160),
		),
		cuts:    []int64{100},
		checked: 4, illegal: "epoch 1",
	}, {
		// An operation spanning the kill belongs to neither epoch.
		name: "an operation straddling a kill is left out",
		evs: history(
			regWrite(0, 1, 10, 20),
			regRead(0, 0, 9, 90, 110),
			regRead(0, 0, 1, 120, 130),
		),
		cuts:    []int64{100},
		checked: 2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var got []finding
			checked, err := checkLinearizable(fold(tc.evs), tc.cuts, dir, collect(&got))
			if err != nil {
				t.Fatal(err)
			}
			if checked != tc.checked {
				t.Errorf("checked %d operations, want %d", checked, tc.checked)
			}
			if tc.illegal == "" {
				if len(got) != 0 {
					t.Fatalf("linearizable history reported:\n%s", fmtFindings(got))
				}
				return
			}
			if len(got) != 1 || got[0].Kind != "register" || got[0].Name != tc.illegal {
				t.Fatalf("want register %s not linearizable, got:\n%s", tc.illegal, fmtFindings(got))
			}
			// The finding points at a visualization of the history.
			html := filepath.Join(dir, "register-epoch"+tc.illegal[len("epoch "):]+".html")
			if _, err := os.Stat(html); err != nil {
				t.Errorf("no visualization: %v", err)
			}
		})
	}
}
