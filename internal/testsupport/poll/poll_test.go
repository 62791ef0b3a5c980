package poll

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records its message and ends the
// calling goroutine, as testing's does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder on a goroutine of its own and returns what
// Fatalf reported, or "" when f returned.
func run(f func(tb testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() { defer close(done); f(r) }()
	<-done
	return r.msg
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	msg := run(func(tb testing.TB) {
		Until(tb, 10*time.Second, "the third call", func() error {
			if calls++; calls < 3 {
				return errors.New("too early")
			}
			return nil
		})
	})
	if msg != "" || calls != 3 {
		t.Fatalf("Until failed with %q after %d calls; want it to return at the third", msg, calls)
	}
}

func TestUntilFailsNamingWhatItWaitedForAndTheLastError(t *testing.T) {
	msg := run(func(tb testing.TB) {
		Until(tb, 50*time.Millisecond, "a condition that never holds", func() error { return errors.New("still broken") })
	})
	for _, want := range []string{"a condition that never holds", "50ms", "still broken"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure %q does not say %q", msg, want)
		}
	}
}

func TestUntilTrueFailsWhenTheConditionNeverHolds(t *testing.T) {
	if msg := run(func(tb testing.TB) { UntilTrue(tb, 50*time.Millisecond, "never", func() bool { return false }) }); msg == "" {
		t.Fatal("UntilTrue returned for a condition that never held")
	}
}
