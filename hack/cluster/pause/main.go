// Command pause is the Pod sandbox process of the local cluster's nodes: it
// holds the sandbox's namespaces, reaps zombies (it is PID 1 in the sandbox)
// and exits on SIGINT or SIGTERM. There is no registry to pull one from, so
// `make images` builds it into an OCI tarball like the project's own images.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
