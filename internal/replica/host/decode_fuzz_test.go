package host

import (
	"bytes"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica"
)

// The admin decoders must never panic, and whatever they accept must be a
// value the handler can act on: valid, and exactly what the body said (it
// encodes and decodes back to itself). The seeds run as ordinary tests;
// `go test -fuzz FuzzDecodeWorkerSpec ./internal/replica/host/` explores.

func FuzzDecodeWorkerSpec(f *testing.F) {
	good, _ := json.Marshal(WorkerSpec{Volume: "v", Replica: "r0", Generation: 1, Listen: "127.0.0.1:7400",
		Self: replica.Peer{ID: "r0", Address: "127.0.0.1:7400", ServerName: "v-r0.example"}, DataDir: "/d",
		CAFile: "/ca", CertFile: "/c", KeyFile: "/k", TokenFile: "/t", MaxSessions: 4})
	for _, seed := range []string{string(good), string(good) + "{}", string(good) + " ", `{"volume":"v","unknown":1}`,
		`{"generation":-1}`, `{"generation":18446744073709551616}`, `{"maxSessions":1e9}`, `[]`, `null`, ``, `{`,
		`{"volume":"a/b","replica":"r"}`, strings.Replace(string(good), `"generation":1`, `"generation":0`, 1)} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		spec, err := decodeWorkerSpec(bytes.NewReader(body))
		if err != nil {
			if !reflect.DeepEqual(spec, WorkerSpec{}) {
				t.Fatalf("a refused spec came back non-empty: %+v", spec)
			}
			return
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("accepted an invalid spec: %v", err)
		}
		again, err := decodeWorkerSpec(bytes.NewReader(mustMarshal(t, spec)))
		if err != nil || !reflect.DeepEqual(again, spec) {
			t.Fatalf("an accepted spec does not survive its own encoding: %v %+v != %+v", err, again, spec)
		}
	})
}

func FuzzDecodeMember(f *testing.F) {
	for _, seed := range []string{`{"id":"r3","address":"127.0.0.1:7403","serverName":"v-r3.example"}`,
		`{"id":"r3","address":"[::1]:7403","serverName":"v-r3.example"}`, `{"id":"r3","address":"127.0.0.1:0","serverName":"s"}`,
		`{"id":"r3","address":"127.0.0.1:99999","serverName":"s"}`, `{"id":"a@b","address":"h:1","serverName":"s"}`,
		`{"id":"r3","address":"h:1","serverName":"s","extra":true}`, `{"id":"r3","address":"h:1","serverName":"s"}{}`,
		`{"id":"","address":"h:1","serverName":"s"}`, `{"id":"r","address":"h","serverName":"s"}`, `"r3"`, `{}`, ``} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeMember(bytes.NewReader(body))
		if err != nil {
			if p != (replica.Peer{}) {
				t.Fatalf("a refused member came back non-empty: %+v", p)
			}
			return
		}
		if err := validMember(p); err != nil {
			t.Fatalf("accepted an invalid member: %v", err)
		}
		// The worker encodes a member as serverName@address in the Raft
		// configuration: an accepted member must split back unchanged.
		san, dial, ok := strings.Cut(p.ServerName+"@"+p.Address, "@")
		if !ok || san != p.ServerName || dial != p.Address {
			t.Fatalf("member %+v is ambiguous in a Raft address", p)
		}
		again, err := decodeMember(bytes.NewReader(mustMarshal(t, p)))
		if err != nil || again != p {
			t.Fatalf("an accepted member does not survive its own encoding: %v %+v != %+v", err, again, p)
		}
	})
}

func FuzzDecodeWait(f *testing.F) {
	for _, seed := range []string{"", "waitFor=Running&timeout=60s", "waitFor=Running", "waitFor=Running&timeout=6m",
		"waitFor=Running&timeout=-1s", "waitFor=Bogus&timeout=1s", "timeout=1s", "waitFor=ReplicaStateLost&timeout=1ns",
		"waitFor=%zz", "waitFor=Running&waitFor=Failed&timeout=1s"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, query string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return // net/http answers 400 before the handler
		}
		w, err := decodeWait(q)
		if err != nil {
			return
		}
		if w.State == "" {
			if w.Timeout != 0 {
				t.Fatalf("no wait but a timeout: %+v", w)
			}
			return
		}
		if w.Timeout <= 0 || w.Timeout > MaxWaitTimeout {
			t.Fatalf("accepted a long poll of %s, outside (0, %s]", w.Timeout, MaxWaitTimeout)
		}
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAdminDecodersRefuseAmbiguousBodies pins the seeds' verdicts, so a
// decoder that turns lenient fails here and not only under -fuzz.
func TestAdminDecodersRefuseAmbiguousBodies(t *testing.T) {
	for name, body := range map[string]string{
		"trailing value":    `{"id":"r3","address":"h:1","serverName":"s"}{}`,
		"unknown field":     `{"id":"r3","address":"h:1","serverName":"s","extra":true}`,
		"port out of range": `{"id":"r3","address":"h:99999","serverName":"s"}`,
		"@ in the id":       `{"id":"a@b","address":"h:1","serverName":"s"}`,
		"no port":           `{"id":"r3","address":"h","serverName":"s"}`,
	} {
		if _, err := decodeMember(strings.NewReader(body)); err == nil {
			t.Errorf("member body with %s was accepted: %s", name, body)
		}
	}
	if _, err := decodeMember(strings.NewReader(`{"id":"r3","address":"127.0.0.1:7403","serverName":"v-r3.example"}`)); err != nil {
		t.Errorf("a well-formed member was refused: %v", err)
	}
	if _, err := decodeWait(url.Values{"waitFor": {"Bogus"}, "timeout": {"1s"}}); err == nil {
		t.Errorf("a long poll for an unknown state was accepted")
	}
}
