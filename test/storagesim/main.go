// Command storagesim is a test fixture for the storage qualification (issue
// 13), not a product component: run in a Pod on a claim of the replicated
// StorageClass, it appends checksummed records to a log (fsync after each)
// and creates small checksummed files (fsync of the file and its directory),
// each on request, and acknowledges an operation only once it is durable. The
// caller keeps the ledger of acknowledged operations outside the volume and
// later asks the fixture to read every one back (POST /verify), which sorts
// them into verified, missing and wrong. See docs/local-cluster.md.
//
// Configuration (environment):
//
//	STORAGESIM_ADDR  HTTP listener, default :8080 (package api lists the routes)
//	STORAGESIM_DIR   the volume, default /work
package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	addr := envOr("STORAGESIM_ADDR", ":8080")
	dir := envOr("STORAGESIM_DIR", "/work")
	w, err := open(dir, log)
	if err != nil {
		log.Error("cannot open the volume", "dir", dir, "err", err)
		os.Exit(1)
	}
	srv := &http.Server{Addr: addr, Handler: w.handler(), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("serving", "addr", addr, "dir", dir)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "addr", addr, "err", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
