// Package apischeme builds the runtime scheme every cellfleet binary and test
// uses: the built-in Kubernetes types plus both cellfleet API groups.
package apischeme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// New returns a scheme with the built-in Kubernetes types and both of
// cellfleet's API groups.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, celldv1alpha1.AddToScheme, storagev1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}
