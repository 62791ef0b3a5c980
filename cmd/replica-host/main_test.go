package main

import (
	"strings"
	"testing"
)

func TestRunFlagsRejectBadValuesWithAClearMessage(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"no mode":           {[]string{}, "one of -config (standalone mode) or -node (Kubernetes mode) is required"},
		"both modes":        {[]string{"-config", "x", "-node", "n"}, "exclude each other"},
		"kube without dirs": {[]string{"-node", "n", "-pod-ip", "127.0.0.1", "-status-listen", "127.0.0.1:0"}, "kubernetes mode needs -state-dir and -consumer-mount-root"},
		"kube without the local driver": {[]string{"-node", "n", "-pod-ip", "127.0.0.1", "-status-listen", "127.0.0.1:0", "-state-dir", "/s", "-consumer-mount-root", "/c"},
			"kubernetes mode needs -local-csi-endpoint"},
		"kube with a TCP local driver": {[]string{"-node", "n", "-pod-ip", "127.0.0.1", "-status-listen", "127.0.0.1:0", "-state-dir", "/s", "-consumer-mount-root", "/c",
			"-local-csi-endpoint", "tcp://127.0.0.1:1"}, "only unix:// sockets are supported"},
		"a Lease shorter than 2s": {[]string{"-node", "n", "-pod-ip", "127.0.0.1", "-status-listen", "127.0.0.1:0", "-state-dir", "/s", "-consumer-mount-root", "/c",
			"-local-csi-endpoint", "unix:///l.sock", "-lease-duration", "1s"}, "-lease-duration must be whole seconds between 2s and 10m0s"},
		"a Lease of part seconds": {[]string{"-node", "n", "-pod-ip", "127.0.0.1", "-status-listen", "127.0.0.1:0", "-state-dir", "/s", "-consumer-mount-root", "/c",
			"-local-csi-endpoint", "unix:///l.sock", "-lease-duration", "2500ms"}, "-lease-duration must be whole seconds"},
		"zero workers":      {[]string{"-config", "x", "-max-workers", "0"}, "max-workers must be at least 1"},
		"negative starts":   {[]string{"-config", "x", "-max-concurrent-starts", "-1"}, "max-concurrent-starts must be at least 1"},
		"tiny segments":     {[]string{"-config", "x", "-journal-segment-bytes", "10"}, "-journal-segment-bytes must be between"},
		"no bandwidth":      {[]string{"-config", "x", "-rebuild-bandwidth-mib", "0"}, "-rebuild-bandwidth-mib must be between"},
		"unknown log level": {[]string{"-config", "x", "-log-level", "loud"}, "-log-level"},
		"stray argument":    {[]string{"-config", "x", "serve"}, "unknown argument"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseRun(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
	t.Setenv("NODE_NAME", "node-a") // a NODE Pod's environment never turns -config into Kubernetes mode
	f, err := parseRun([]string{"-config", "host.json"})
	if err != nil {
		t.Fatalf("defaults must be valid: %v", err)
	}
	if f.limits.MaxWorkers != 128 || f.limits.MaxStarts != 4 || f.limits.MaxHTTPOperations != 32 ||
		f.limits.MaxCaptures != 2 || f.limits.MaxRebuilds != 2 || f.limits.RebuildBandwidth != 32<<20 {
		t.Fatalf("defaults differ from the bounds docs/replica-engine.md states: %+v", f.limits)
	}
}
