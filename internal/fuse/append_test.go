package fuse_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	cfuse "github.com/cellfleet/cellfleet/internal/fuse"
)

// TestConcurrentAppendsAcrossCoordinatorChange: two writers append records
// to one file through one mount (O_APPEND) while the coordinator's process
// is killed. Each append is fsynced, so a record counts as acknowledged
// only once it is committed on a quorum (write-behind would otherwise
// queue every write in milliseconds, before the kill), and the writers go
// on until a third of the records were acknowledged after the kill: the
// commits cross it. Every acknowledged record is in the file exactly once,
// no record appears twice, none is torn, and every close succeeds.
func TestConcurrentAppendsAcrossCoordinatorChange(t *testing.T) {
	c := startCluster(t, 1<<30)
	mnt := c.mount(t, cfuse.Options{SingleWriter: true})
	path := filepath.Join(mnt, "appends")
	const perWriter = 300
	var committed atomic.Int64
	stop := make(chan struct{})
	acked := make([]map[string]bool, 2)
	errs := make([][]error, 2)
	closeErrs := make([]error, 2)
	var wg sync.WaitGroup
	for w := range 2 {
		acked[w] = map[string]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				closeErrs[w] = fmt.Errorf("open: %w", err)
				return
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					closeErrs[w] = f.Close()
					return
				default:
				}
				rec := fmt.Sprintf("writer %d record %04d %s\n", w, i, bytes.Repeat([]byte{'a' + byte(w)}, 40))
				_, err := f.WriteString(rec)
				if err == nil {
					err = f.Sync()
				}
				if err != nil {
					// An uncertain append (EIO) may or may not be in the
					// file; it must not be there twice.
					errs[w] = append(errs[w], err)
					continue
				}
				acked[w][rec] = true
				committed.Add(1)
			}
		}()
	}
	waitUntil(t, "a third of the appends committed", func() bool { return committed.Load() >= 2*perWriter/3 })
	before := committed.Load()
	victim := c.KillCoordinator(t)
	gone := committed.Load()
	t.Logf("killed coordinator r%d after %d committed appends", victim, before)
	// At most one append per writer was in flight when the process died:
	// more than two acknowledged since include appends made after it.
	waitUntil(t, "a third of the appends committed after the kill", func() bool {
		return committed.Load() >= gone+2+perWriter/3
	})
	close(stop)
	wg.Wait()
	for w, err := range closeErrs {
		if err != nil {
			t.Errorf("writer %d: close after its last fsynced append: %v", w, err)
		}
	}

	// The volume's content, not this kernel's pages.
	fresh := c.mount(t, cfuse.Options{ReadOnly: true})
	data, err := os.ReadFile(filepath.Join(fresh, "appends"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		seen[string(line)]++
	}
	for rec, n := range seen {
		var w, i int
		if _, err := fmt.Sscanf(rec, "writer %d record %d", &w, &i); err != nil || len(rec) != len("writer 0 record 0000 ")+41 {
			t.Errorf("the file holds a torn or foreign record %q", rec)
			continue
		}
		if n > 1 {
			t.Errorf("record %q appended once is in the file %d times", rec[:20], n)
		}
	}
	for w := range 2 {
		for rec := range acked[w] {
			if seen[rec] != 1 {
				t.Errorf("acknowledged record %q is in the file %d times, want exactly once", rec[:20], seen[rec])
			}
		}
		if len(errs[w]) > 0 {
			t.Logf("writer %d saw %d uncertain appends (first: %v)", w, len(errs[w]), errs[w][0])
		}
	}
	t.Logf("%d acknowledged appends (%d after the kill), %d records in the file",
		len(acked[0])+len(acked[1]), committed.Load()-gone, len(seen))
}
