// Package poll is the one way tests wait: a condition polled until it holds
// or a deadline passes, so that no sleep stands in for synchronisation. It
// imports nothing of this module, so that any test, a package's internal
// ones included, may use it without an import cycle.
//
// It is test support: production code must never import it.
package poll

import (
	"errors"
	"testing"
	"time"
)

// interval is how often a condition is evaluated: short against the
// seconds a test waits, long enough not to load a 2-core machine.
const interval = 20 * time.Millisecond

// errNotYet is what a boolean condition reports while it does not hold.
var errNotYet = errors.New("the condition does not hold yet")

// Until evaluates cond until it returns nil, and fails the test, naming
// what it waited for and cond's last error, once timeout has passed.
func Until(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(interval) // the polling interval of a deadline-bounded wait
	}
}

// UntilTrue is Until for a condition with no reason to give.
func UntilTrue(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Until(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}
