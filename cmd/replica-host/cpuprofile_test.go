package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// The benchmarks' per-process profiles: with the variable set, a profile
// named after the process appears once stopped, in pprof's gzip-compressed
// form; unset, nothing is written.
func TestCPUProfileIsWrittenOnlyWhenTheEnvironmentAsks(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	t.Setenv(host.CPUProfileEnv, "")
	stop, err := startCPUProfile(log)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("unset variable wrote %d files", len(ents))
	}
	t.Setenv(host.CPUProfileEnv, dir)
	stop, err = startCPUProfile(log)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	b, err := os.ReadFile(filepath.Join(dir, "cpu-"+strconv.Itoa(os.Getpid())+".pprof"))
	if err != nil {
		t.Fatalf("no profile named after the process: %v", err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("the profile (%d bytes) is not a finished pprof file", len(b))
	}
}
