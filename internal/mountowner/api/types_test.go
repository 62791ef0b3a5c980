package api

import (
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/pki"
)

var testCA = func() string {
	ca, err := pki.NewCA("test", time.Hour)
	if err != nil {
		panic(err)
	}
	return string(ca.CertPEM)
}()

func validRequest() MountRequest {
	return MountRequest{VolumeID: "pvc-1", Target: "/var/lib/kubelet/staging/pvc-1",
		Endpoints: []Endpoint{{ID: "r0", Address: "10.0.0.1:7400", ServerName: "pvc-1-r0.ns.svc"}},
		CAPEM:     testCA, Token: strings.Repeat("t", 32)}
}

// TestMountRequestValidation: requests outside the protocol's bounds are
// refused before anything is mounted.
func TestMountRequestValidation(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*MountRequest)
		want   string // substring of the error; empty: valid
	}{
		{"valid", func(*MountRequest) {}, ""},
		{"volume ID with a slash", func(r *MountRequest) { r.VolumeID = "../etc" }, "volume ID"},
		{"volume ID too long", func(r *MountRequest) { r.VolumeID = strings.Repeat("a", MaxVolumeIDLen+1) }, "volume ID"},
		{"relative target", func(r *MountRequest) { r.Target = "staging" }, "target"},
		{"unclean target", func(r *MountRequest) { r.Target = "/var/../etc" }, "target"},
		{"root target", func(r *MountRequest) { r.Target = "/" }, "target"},
		{"no endpoints", func(r *MountRequest) { r.Endpoints = nil }, "endpoints"},
		{"six endpoints", func(r *MountRequest) {
			for i := range 5 {
				r.Endpoints = append(r.Endpoints, Endpoint{ID: string(rune('a' + i)), Address: "h:1", ServerName: "s"})
			}
		}, "endpoints"},
		{"endpoint without server name", func(r *MountRequest) { r.Endpoints[0].ServerName = "" }, "server name"},
		{"duplicate endpoint", func(r *MountRequest) { r.Endpoints = append(r.Endpoints, r.Endpoints[0]) }, "twice"},
		{"CA that is not PEM", func(r *MountRequest) { r.CAPEM = "not a certificate" }, "CA PEM"},
		{"short token", func(r *MountRequest) { r.Token = "short" }, "token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest()
			tc.mutate(&r)
			err := r.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("a valid request was refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("the request must be refused mentioning %q, got %v", tc.want, err)
			}
		})
	}
}

// TestUnmountRequestNamesExactlyOneSession: by volume or by target, never
// both, never neither.
func TestUnmountRequestNamesExactlyOneSession(t *testing.T) {
	for _, tc := range []struct {
		req UnmountRequest
		ok  bool
	}{
		{UnmountRequest{VolumeID: "pvc-1"}, true},
		{UnmountRequest{Target: "/staging/pvc-1"}, true},
		{UnmountRequest{VolumeID: "pvc-1", Target: "/staging/pvc-1"}, false},
		{UnmountRequest{}, false},
		{UnmountRequest{Target: "relative"}, false},
	} {
		if err := tc.req.Validate(); (err == nil) != tc.ok {
			t.Errorf("unmount request %+v: valid=%v, want %v (%v)", tc.req, err == nil, tc.ok, err)
		}
	}
}
