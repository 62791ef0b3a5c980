package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestBadCommandLinesAreUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"scale"}, `unknown command "scale"`},
		{[]string{"status"}, "exactly one fleet name, got 0"},
		{[]string{"status", "a", "b"}, "exactly one fleet name, got 2"},
		{[]string{"volumes", "extra"}, "volumes takes no arguments"},
		{[]string{"status", "web", "--bogus"}, "flag provided but not defined"},
	}
	for _, tc := range cases {
		err := run(context.Background(), tc.args, io.Discard)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want a usage error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestFlagsMayFollowTheFleetName(t *testing.T) {
	err := run(context.Background(), []string{"status", "web", "-n", "prod", "--kubeconfig", "/nonexistent/kubeconfig"}, io.Discard)
	if errors.Is(err, errUsage) {
		t.Fatalf("flags after the fleet name were refused: %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "load kubeconfig") {
		t.Fatalf("run with a missing kubeconfig = %v, want a kubeconfig error", err)
	}
}
