package fuse

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

func TestNameCacheAnswersOnlyForDirectoriesItKnowsCompletely(t *testing.T) {
	c := newNames()
	if c.absent(1, "a") {
		t.Fatal("a directory never listed must not answer absent")
	}
	c.known(1, []string{"a"}, c.since())
	if c.absent(1, "a") || !c.absent(1, "b") {
		t.Fatal("a listed directory answers absent exactly for names it does not hold")
	}
	c.added(1, "b")
	c.removed(1, "a")
	if c.absent(1, "b") || !c.absent(1, "a") {
		t.Fatal("changes through the mount must update the known names")
	}
	c.forget(1)
	if c.absent(1, "a") {
		t.Fatal("a forgotten directory must not answer absent")
	}
}

func TestNameCacheIgnoresAListingThatRacedWithAChange(t *testing.T) {
	c := newNames()
	epoch := c.since()
	c.added(7, "made-while-listing") // not known yet: only the epoch moves
	c.known(7, nil, epoch)
	if c.absent(7, "made-while-listing") {
		t.Fatal("a listing read while a name changed must not be recorded")
	}
}

func TestNameCacheSettlesByTheCertaintyOfTheOutcome(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		wantAbsent bool // of the new name afterwards
		wantKnown  bool // the directory still answers
	}{
		{"applied", nil, false, true},
		{"refused by the engine", syscall.EEXIST, true, true},
		{"outcome unknown", fmt.Errorf("create: %w", client.ErrUncertain), false, false},
		{"volume unavailable", client.ErrUnavailable, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newNames()
			c.known(1, []string{"old"}, c.since())
			c.settled(1, tc.err, func() { c.added(1, "new") })
			if got := c.absent(1, "new"); got != tc.wantAbsent {
				t.Fatalf("absent(new) = %v, want %v", got, tc.wantAbsent)
			}
			if got := c.absent(1, "other"); got != tc.wantKnown {
				t.Fatalf("directory still known = %v, want %v", got, tc.wantKnown)
			}
		})
	}
}

func TestNameCacheStaysWithinItsBound(t *testing.T) {
	c := newNames()
	big := make([]string, maxCachedNames/2+1)
	for i := range big {
		big[i] = fmt.Sprint(i)
	}
	c.known(1, big, c.since())
	c.known(2, big, c.since())
	if c.total > maxCachedNames {
		t.Fatalf("%d names held, bound %d", c.total, maxCachedNames)
	}
	if c.absent(1, "x") {
		t.Fatal("directories dropped to stay within the bound must not answer")
	}
	if !c.absent(2, "x") {
		t.Fatal("the latest listing should be held after starting over")
	}
}
