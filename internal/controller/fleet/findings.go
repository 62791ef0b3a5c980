package fleet

import (
	"fmt"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// finding is a gate's verdict that stops the reconcile: the Blocked reason
// and a message naming what is wrong and what to do.
type finding struct {
	reason  celldv1alpha1.ConditionReason
	message string
}

func blocked(reason celldv1alpha1.ConditionReason, format string, args ...any) *finding {
	return &finding{reason: reason, message: fmt.Sprintf(format, args...)}
}
