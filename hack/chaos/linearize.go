package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// The register model, in internal/replica/processtest's style: one
// register per file; a read must return the value of the last write
// linearized before it. unknown is the state at the start of a mount
// epoch: after the mount owner was killed the page cache of the dead mount
// is gone, so the first read of the new mount tells what the register
// holds (durability is checked separately, against the acknowledged
// writes).
type registerInput struct {
	file  int
	write bool
	value uint64
}

const unknown = math.MaxUint64

func registerModel(initial uint64) porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			byFile := map[int][]porcupine.Operation{}
			for _, op := range h {
				f := op.Input.(registerInput).file
				byFile[f] = append(byFile[f], op)
			}
			var out [][]porcupine.Operation
			for _, ops := range byFile {
				out = append(out, ops)
			}
			return out
		},
		Init: func() any { return initial },
		Step: func(state, input, output any) (bool, any) {
			in := input.(registerInput)
			if in.write {
				return true, in.value
			}
			if state.(uint64) == unknown {
				return true, output.(uint64)
			}
			return output.(uint64) == state.(uint64), state
		},
		DescribeOperation: func(input, output any) string {
			in := input.(registerInput)
			if in.write {
				return fmt.Sprintf("reg%d := %d", in.file, in.value)
			}
			return fmt.Sprintf("reg%d -> %v", in.file, output)
		},
	}
}

// checkLinearizable splits the register history at each mount-owner kill
// (wall-clock times, as the workload's) and checks each epoch with
// porcupine. A write whose fsync failed stays pending forever: it may have
// taken effect at any time after its call.
func checkLinearizable(st *state, cuts []int64, dir string, add adder) (checked int, err error) {
	bounds := append([]int64{0}, cuts...)
	bounds = append(bounds, math.MaxInt64)
	sort.Slice(bounds, func(i, j int) bool { return bounds[i] < bounds[j] })
	for e := 0; e+1 < len(bounds); e++ {
		lo, hi := bounds[e], bounds[e+1]
		var ops []porcupine.Operation
		for _, ev := range st.registerH {
			ret := ev.Ret
			if ret == 0 {
				ret = math.MaxInt64
			}
			if ev.Call < lo || ev.Call >= hi {
				continue
			}
			if ret >= hi && ret != math.MaxInt64 {
				continue // straddles a mount's death: its outcome belongs to neither epoch
			}
			op := porcupine.Operation{ClientId: ev.Slot, Call: ev.Call, Return: ret}
			if ev.Read {
				op.ClientId = 100 + ev.Slot
				op.Input, op.Output = registerInput{file: ev.W, value: 0}, ev.Ver
			} else {
				op.Input, op.Output = registerInput{file: ev.W, write: true, value: ev.Ver}, uint64(0)
			}
			ops = append(ops, op)
		}
		if len(ops) == 0 {
			continue
		}
		checked += len(ops)
		initial := uint64(0)
		if e > 0 {
			initial = unknown
		}
		model := registerModel(initial)
		res, info := porcupine.CheckOperationsVerbose(model, ops, 2*time.Minute)
		switch res {
		case porcupine.Illegal:
			path := filepath.Join(dir, fmt.Sprintf("register-epoch%d.html", e))
			_ = porcupine.VisualizePath(model, info, path)
			add("register", fmt.Sprintf("epoch %d", e), "register history of %d operations is not linearizable (see %s)", len(ops), path)
		case porcupine.Unknown:
			return checked, fmt.Errorf("porcupine timed out on epoch %d (%d operations)", e, len(ops))
		}
	}
	return checked, nil
}

// verifyRegisters: each register holds its last acknowledged value or a
// later one whose write was tried.
func verifyRegisters(mnt string, st *state, add adder) {
	for k := range registers {
		name := fmt.Sprintf("reg/%d", k)
		b, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil || len(b) < 8 {
			add("register", name, "unreadable or short (%d bytes): %v", len(b), err)
			continue
		}
		v := binary.LittleEndian.Uint64(b)
		ack := st.regAck[k]
		if v == ack || (v > ack && st.regTried[k][v]) {
			continue
		}
		add("register", name, "holds %d, last acknowledged write %d", v, ack)
	}
}
