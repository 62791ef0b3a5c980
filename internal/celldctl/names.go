package celldctl

// How the plugin names objects in its messages: kubectl's lower-case kind,
// then the name, then the namespace when there is one, so an error says
// exactly which object it is about (celldfleet "web" not found in namespace
// "prod").

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/duration"
)

// objectKind is the lower-case kind the plugin names objects by.
type objectKind string

const (
	kindFleet   objectKind = "celldfleet"
	kindVolume  objectKind = "replicatedvolume"
	kindReplica objectKind = "volumereplica"
)

// notFoundError says which object does not exist; it unwraps to the API
// server's NotFound so callers can still tell it apart.
type notFoundError struct {
	kind            objectKind
	namespace, name string
	err             error
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("%s %q not found%s", e.kind, e.name, inNamespace(e.namespace))
}
func (e *notFoundError) Unwrap() error { return e.err }

// deleted says the object went away while it was watched.
func (e *notFoundError) deleted() string {
	return fmt.Sprintf("%s %q%s was deleted", e.kind, e.name, inNamespace(e.namespace))
}

func inNamespace(namespace string) string {
	if namespace == "" {
		return ""
	}
	return fmt.Sprintf(" in namespace %q", namespace)
}

// getError names the object a failed get was about.
func getError(err error, kind objectKind, namespace, name string) error {
	if apierrors.IsNotFound(err) {
		return &notFoundError{kind: kind, namespace: namespace, name: name, err: err}
	}
	return fmt.Errorf("get %s %q%s: %w", kind, name, inNamespace(namespace), err)
}

// age renders how long ago t was the way kubectl does (90s, 5m, 3h12m, 4d).
func age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
