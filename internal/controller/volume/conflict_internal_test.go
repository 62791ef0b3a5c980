package volume

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A reconcile that stopped on conflicts alone is a retry; one conflict
// beside another error is still a failure.
func TestOnlyConflictsTellsARetryFromAFailure(t *testing.T) {
	gr := schema.GroupResource{Group: "storage.eric.dev", Resource: "replicatedvolumes"}
	conflict := apierrors.NewConflict(gr, "v1", errors.New("the object has been modified"))
	other := errors.New("connection reset")
	cases := map[string]struct {
		err  error
		want bool
	}{
		"a conflict":                      {conflict, true},
		"a wrapped conflict":              {fmt.Errorf("write status of volume v1: %w", conflict), true},
		"two joined conflicts":            {errors.Join(conflict, fmt.Errorf("peers: %w", conflict)), true},
		"a wrap around joined conflicts":  {fmt.Errorf("x: %w", errors.Join(conflict, conflict)), true},
		"a conflict beside another error": {errors.Join(other, conflict), false},
		"a wrap around a mixed join":      {fmt.Errorf("x: %w", errors.Join(conflict, other)), false},
		"another API error":               {apierrors.NewNotFound(gr, "v1"), false},
		"a plain error":                   {other, false},
	}
	for name, tc := range cases {
		if got := onlyConflicts(tc.err); got != tc.want {
			t.Errorf("%s: onlyConflicts(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}
