package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// registerWriter writes increasing values to register files (8 bytes at
// offset 0, fsynced). A write's interval runs from its pwrite to its
// fsync's return; one whose pwrite or fsync failed has an unknown outcome
// (it may or may not have taken effect).
func (w *worker) registerWriter(ctx context.Context, rng *rand.Rand) {
	hs := make([]*handle, registers)
	for k := range hs {
		hs[k] = &handle{path: filepath.Join(w.mnt, fmt.Sprintf("reg/%d", k)), flags: os.O_RDWR}
		defer hs[k].close()
	}
	var val uint64
	for ctx.Err() == nil {
		k := rng.IntN(registers)
		h := hs[k]
		f, err := h.get()
		if err != nil {
			w.fail(ctx, "register-open", err)
			continue
		}
		val++
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], val)
		w.led.add(event{Kind: "register", Phase: "try", W: k, Ver: val})
		call := time.Now().UnixNano()
		err = pwrite(f, b[:], 0)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			h.failed(err)
			w.led.add(event{Kind: "register", Phase: "fail", W: k, Ver: val, Call: call})
			w.fail(ctx, "register-write", err)
			continue
		}
		h.ok()
		w.led.add(event{Kind: "register", Phase: "ack", W: k, Ver: val, Call: call, Ret: time.Now().UnixNano()})
		sleep(ctx, 2*w.pace)
	}
}

// registerReader reads the registers through descriptors of its own.
func (w *worker) registerReader(ctx context.Context, rng *rand.Rand, id int) {
	hs := make([]*handle, registers)
	for k := range hs {
		hs[k] = &handle{path: filepath.Join(w.mnt, fmt.Sprintf("reg/%d", k)), flags: os.O_RDONLY}
		defer hs[k].close()
	}
	for ctx.Err() == nil {
		k := rng.IntN(registers)
		h := hs[k]
		f, err := h.get()
		if err != nil {
			w.fail(ctx, "register-open", err)
			continue
		}
		var b [8]byte
		call := time.Now().UnixNano()
		n, err := f.ReadAt(b[:], 0)
		ret := time.Now().UnixNano()
		if err != nil || n != 8 {
			if err == nil {
				err = errShort
			}
			h.failed(err)
			w.fail(ctx, "register-read", err)
			continue
		}
		h.ok()
		w.led.add(event{Kind: "register", Phase: "ack", Read: true, W: k, Slot: id, Ver: binary.LittleEndian.Uint64(b[:]),
			Call: call, Ret: ret})
		sleep(ctx, w.pace)
	}
}
