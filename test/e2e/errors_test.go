package e2e

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func isConflict(err error) bool { return apierrors.IsConflict(err) }
func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
