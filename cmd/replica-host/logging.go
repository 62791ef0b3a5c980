package main

// The host's log. In Kubernetes mode the host runs a controller-runtime
// manager (internal/replica/kubehost), and controller-runtime logs through
// its own global logger: unset, it drops every line and prints
// "[controller-runtime] log.SetLogger(...) was never called" with a stack
// trace 30 s after the start. The manager sets it the same
// way (cmd/manager/main.go).

import (
	"io"
	"log/slog"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// newLogger is the host's JSON log on w at level, and controller-runtime's
// logger from then on: its lines join the host's, at the host's level
// (logr's V(1) is slog's Debug).
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	return log
}
