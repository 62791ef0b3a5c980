package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// startCPUProfile starts the profile host.CPUProfileEnv asks for and returns the
// function that finishes it (a no-op when the variable is unset).
func startCPUProfile(log *slog.Logger) (stop func(), err error) {
	dir := os.Getenv(host.CPUProfileEnv)
	if dir == "" {
		return func() {}, nil
	}
	path := filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", host.CPUProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: start the CPU profile: %w", host.CPUProfileEnv, err)
	}
	log.Warn("test CPU profile running until SIGTERM", "env", host.CPUProfileEnv, "file", path)
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Error("CPU profile not written", "file", path, "error", err)
		}
	}, nil
}
