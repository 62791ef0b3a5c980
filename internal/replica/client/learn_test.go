package client

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

func learningClient() *Client {
	cfg := Config{Endpoints: []Endpoint{{ID: "r0", Address: "a:1", ServerName: "r0.vol"}}}
	return &Client{cfg: cfg, configured: 1, conns: map[string]*conn{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func hint(id string) wire.Reply {
	return wire.Reply{Status: wire.StatusNotCoordinator, LeaderID: id, LeaderAddr: id + ":1", LeaderServerName: id + ".vol"}
}

// A hint without a server name cannot be verified, so it is not followed;
// learned endpoints stay bounded, the configured ones are never forgotten.
func TestClientLearnsHintedCoordinatorsWithinItsBound(t *testing.T) {
	c := learningClient()
	if c.follow(wire.Reply{Status: wire.StatusNotCoordinator, LeaderID: "r9", LeaderAddr: "r9:1"}) {
		t.Fatal("a hint without a server name was followed")
	}
	if len(c.cfg.Endpoints) != 1 {
		t.Fatalf("endpoints %v after an unverifiable hint", c.cfg.Endpoints)
	}
	for k := 1; k <= maxLearned+3; k++ {
		id := fmt.Sprintf("r%d", k)
		if !c.follow(hint(id)) {
			t.Fatalf("hint %s not followed", id)
		}
		if got := c.Coordinator(); got != id {
			t.Fatalf("following %s, the client targets %s", id, got)
		}
		if c.follow(hint(id)) {
			t.Fatalf("a repeated hint of %s counted as a change", id)
		}
	}
	eps := c.cfg.Endpoints
	if len(eps) != 1+maxLearned || eps[0].ID != "r0" {
		t.Fatalf("endpoints after %d hints: %v, want r0 and the %d newest learned", maxLearned+3, eps, maxLearned)
	}
	if last := eps[len(eps)-1]; last != (Endpoint{ID: fmt.Sprintf("r%d", maxLearned+3), Address: fmt.Sprintf("r%d:1", maxLearned+3), ServerName: fmt.Sprintf("r%d.vol", maxLearned+3)}) {
		t.Fatalf("newest learned endpoint %+v", last)
	}
}
