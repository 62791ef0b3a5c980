package main

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
)

// injectLoss damages the volume as the bug the nemesis hunts would (a
// zeroed 4 KiB record, an empty small file), so that a run with
// --inject-loss shows the checker finds exactly that.
func injectLoss(mnt string, st *state) error {
	if st.appended[0] < 2 {
		return errors.New("appender 0 acknowledged fewer than 2 records")
	}
	slot := st.appended[0] / 2
	f, err := os.OpenFile(filepath.Join(mnt, "a/0"), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := pwrite(f, make([]byte, recordSize), int64(slot)*recordSize); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	var names []string
	for n, c := range st.creates {
		if c.acked && !c.unlinkTried {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return errors.New("no acknowledged create to empty")
	}
	sort.Strings(names)
	name := names[len(names)/2]
	if err := os.Truncate(filepath.Join(mnt, name), 0); err != nil {
		return err
	}
	say("self-test: zeroed a/0 slot %d and emptied %s; the check must report both", slot, name)
	return nil
}
