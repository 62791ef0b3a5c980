package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestProcessExitsWhenReplacementDelayTooShort runs the real binary: an
// operator misconfigured with a delay below one minute must not start, and
// must say why.
func TestProcessExitsWhenReplacementDelayTooShort(t *testing.T) {
	if args, ok := os.LookupEnv("CELLFLEET_MANAGER_ARGS"); ok {
		// The re-executed child: run main as the manager binary would.
		os.Args = append([]string{"manager"}, strings.Fields(args)...)
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcessExitsWhenReplacementDelayTooShort$")
	cmd.Env = append(os.Environ(), "CELLFLEET_MANAGER_ARGS=--member-replacement-delay=30s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	exitErr, ok := err.(*exec.ExitError)
	if !ok || exitErr.ExitCode() != 1 {
		t.Fatalf("manager with --member-replacement-delay=30s exited with %v, want exit code 1; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "below the minimum of 1m0s") {
		t.Fatalf("manager's message does not say the delay is below the minimum:\n%s", stderr.String())
	}
}
