package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/cellfleet/cellfleet/hack/internal/localvolume"
)

// appender appends 4 KiB records with pwrite at the next offset, each
// fsynced; a record whose pwrite or fsync failed is not acknowledged and is
// written again at the same offset until an fsync succeeds.
func (w *worker) appender(ctx context.Context, id int) {
	h := &handle{path: filepath.Join(w.mnt, fmt.Sprintf("a/%d", id)), flags: os.O_CREATE | os.O_RDWR}
	defer h.close()
	for slot := 0; ctx.Err() == nil; {
		f, err := h.get()
		if err != nil {
			w.fail(ctx, "append-open", err)
			continue
		}
		if err := pwrite(f, appendRecord(id, slot), int64(slot)*recordSize); err != nil {
			h.failed(err)
			w.fail(ctx, "append-pwrite", err)
			continue
		}
		if err := f.Sync(); err != nil {
			h.failed(err)
			w.fail(ctx, "append-fsync", err)
			continue
		}
		h.ok()
		w.led.add(event{Kind: "append", Phase: "ack", W: id, Slot: slot})
		slot++
		sleep(ctx, w.pace)
	}
}

// overwriter rewrites records in place in one file, each with a new
// version, fsync after each.
func (w *worker) overwriter(ctx context.Context, rng *rand.Rand) {
	h := &handle{path: filepath.Join(w.mnt, "ow"), flags: os.O_RDWR}
	defer h.close()
	ver := make([]uint64, overwriteSlots)
	for ctx.Err() == nil {
		f, err := h.get()
		if err != nil {
			w.fail(ctx, "overwrite-open", err)
			continue
		}
		s := rng.IntN(overwriteSlots)
		ver[s]++
		w.led.add(event{Kind: "overwrite", Phase: "try", Slot: s, Ver: ver[s]})
		if err := pwrite(f, overwriteRecord(s, ver[s]), int64(s)*recordSize); err != nil {
			h.failed(err)
			w.fail(ctx, "overwrite-pwrite", err)
			continue
		}
		if err := f.Sync(); err != nil {
			h.failed(err)
			w.fail(ctx, "overwrite-fsync", err)
			continue
		}
		h.ok()
		w.led.add(event{Kind: "overwrite", Phase: "ack", Slot: s, Ver: ver[s]})
		sleep(ctx, w.pace)
	}
}

// creator creates small files: create, write 1 KiB, fsync, close, and
// every other time an fsync of the directory after the close.
func (w *worker) creator(ctx context.Context, _ *rand.Rand) {
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("c/%06d", i)
		dir := i%2 == 1
		w.led.add(event{Kind: "create", Phase: "try", Name: name, Dir: dir})
		if err := createOne(filepath.Join(w.mnt, name), fileContent(name, createSize, 0), dir); err != nil {
			w.fail(ctx, "create", err)
			continue
		}
		w.led.add(event{Kind: "create", Phase: "ack", Name: name, Dir: dir})
		select {
		case w.created <- name:
		default:
		}
		sleep(ctx, w.pace)
	}
}

func createOne(path string, data []byte, dir bool) error {
	if err := localvolume.CreateFileSync(path, data); err != nil {
		return err
	}
	if dir {
		return syncDir(filepath.Dir(path))
	}
	return nil
}

// unlinker removes about a third of the acknowledged creates: unlink and
// an fsync of the directory; after that the name must be gone for good.
func (w *worker) unlinker(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		var name string
		select {
		case <-ctx.Done():
			return
		case name = <-w.created:
		}
		if rng.IntN(3) != 0 {
			continue
		}
		w.led.add(event{Kind: "unlink", Phase: "try", Name: name})
		path := filepath.Join(w.mnt, name)
		if err := os.Remove(path); err != nil {
			w.fail(ctx, "unlink", err)
			continue
		}
		if err := syncDir(filepath.Dir(path)); err != nil {
			w.fail(ctx, "unlink-dirsync", err)
			continue
		}
		w.led.add(event{Kind: "unlink", Phase: "ack", Name: name})
		sleep(ctx, 3*w.pace)
	}
}

// renamer replaces files atomically: write a temporary file, fsync, rename
// it over the target, fsync the directory.
func (w *worker) renamer(ctx context.Context, rng *rand.Rand) {
	ver := make([]uint64, renameTargets)
	for ctx.Err() == nil {
		k := rng.IntN(renameTargets)
		ver[k]++
		name := fmt.Sprintf("r/t%d", k)
		w.led.add(event{Kind: "rename", Phase: "try", Name: name, Ver: ver[k]})
		tmp := filepath.Join(w.mnt, fmt.Sprintf("r/tmp%d", k))
		if err := localvolume.WriteFileSync(tmp, fileContent(name, renameSize, ver[k])); err != nil {
			w.fail(ctx, "rename-write", err)
			continue
		}
		if err := os.Rename(tmp, filepath.Join(w.mnt, name)); err != nil {
			w.fail(ctx, "rename", err)
			continue
		}
		if err := syncDir(filepath.Join(w.mnt, "r")); err != nil {
			w.fail(ctx, "rename-dirsync", err)
			continue
		}
		w.led.add(event{Kind: "rename", Phase: "ack", Name: name, Ver: ver[k]})
		sleep(ctx, w.pace)
	}
}

// truncater sets files' sizes with ftruncate (shrinking and growing) and
// fsyncs.
func (w *worker) truncater(ctx context.Context, rng *rand.Rand) {
	hs := make([]*handle, truncFiles)
	for k := range hs {
		hs[k] = &handle{path: filepath.Join(w.mnt, fmt.Sprintf("t/f%d", k)), flags: os.O_RDWR}
		defer hs[k].close()
	}
	ver := make([]uint64, truncFiles)
	for ctx.Err() == nil {
		k := rng.IntN(truncFiles)
		h := hs[k]
		f, err := h.get()
		if err != nil {
			w.fail(ctx, "truncate-open", err)
			continue
		}
		ver[k]++
		size := rng.Int64N(4 * truncInitial)
		name := fmt.Sprintf("t/f%d", k)
		w.led.add(event{Kind: "truncate", Phase: "try", Name: name, Ver: ver[k], Size: size})
		if err := f.Truncate(size); err != nil {
			h.failed(err)
			w.fail(ctx, "truncate", err)
			continue
		}
		if err := f.Sync(); err != nil {
			h.failed(err)
			w.fail(ctx, "truncate-fsync", err)
			continue
		}
		h.ok()
		w.led.add(event{Kind: "truncate", Phase: "ack", Name: name, Ver: ver[k], Size: size})
		sleep(ctx, 2*w.pace)
	}
}
