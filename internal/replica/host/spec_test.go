package host_test

import (
	"strings"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/host"
)

func TestWorkerSpecRejectsAnExactlyOnceTableOutOfBounds(t *testing.T) {
	valid := host.WorkerSpec{Volume: "vol", Replica: "r0", Generation: 1, Listen: "127.0.0.1:1", DataDir: "/d",
		CAFile: "ca", CertFile: "c", KeyFile: "k", TokenFile: "t"}
	cases := []struct {
		name        string
		maxSessions int
		wantErr     bool
	}{
		{"default", 0, false},
		{"smallest", 1, false},
		{"largest", host.MaxSessionsLimit, false},
		{"negative", -1, true},
		{"past the limit", host.MaxSessionsLimit + 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := valid
			s.MaxSessions = tc.maxSessions
			err := s.Validate()
			if tc.wantErr != (err != nil) {
				t.Fatalf("maxSessions %d: error %v, want error %v", tc.maxSessions, err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "maxSessions must be between") {
				t.Fatalf("error %q does not name the bound", err)
			}
		})
	}
}
