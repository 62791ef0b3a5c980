package member

import (
	"context"
	"testing"
)

func TestPeerSourcesParseOrAreRejected(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"", "", true},
		{"dns:f-peers.ns.svc:8081", "dns:f-peers.ns.svc:8081", true},
		{"10.0.0.1:8081, 10.0.0.2:8081", "10.0.0.1:8081,10.0.0.2:8081", true},
		{"dns:f-peers.ns.svc", "", false},
		{"dns::8081", "", false},
		{"dns:f-peers:http", "", false},
		{"10.0.0.1", "", false},
	}
	for _, tc := range cases {
		got, err := ParsePeerSource(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParsePeerSource(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && got.String() != tc.want {
			t.Errorf("ParsePeerSource(%q) = %q, want %q", tc.in, got.String(), tc.want)
		}
	}
}

func TestAdvertiseAddressNamesThePeersService(t *testing.T) {
	cases := map[string]string{
		"f-0.f-peers.ns.svc:8081": "dns:f-peers.ns.svc:8081",
		"10.244.1.5:8081":         "", // a Bucket member advertises its Pod IP: no peers Service
		"nohost":                  "",
		"single:8081":             "",
	}
	for in, want := range cases {
		if got := PeerSourceFromAdvertise(in).String(); got != want {
			t.Errorf("PeerSourceFromAdvertise(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAMemberIsNeverItsOwnPeer(t *testing.T) {
	src, err := ParsePeerSource("127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7001")
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.resolve(context.Background(), "127.0.0.1:7001")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "127.0.0.1:7002" {
		t.Fatalf("peers of 127.0.0.1:7001 = %v, want only 127.0.0.1:7002", got)
	}
}
