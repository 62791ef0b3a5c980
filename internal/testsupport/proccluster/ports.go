package proccluster

import (
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/standalone"
)

// FreePorts returns the first of n consecutive TCP ports free on loopback
// now. They lie below the kernel's ephemeral range
// (standalone.FreePortRange says why): a port inside it can be taken by
// any outgoing connection before the process under test binds it.
func FreePorts(t testing.TB, n int) int {
	t.Helper()
	base, err := standalone.FreePortRange(n)
	if err != nil {
		t.Fatalf("free ports for a test: %v", err)
	}
	return base
}
