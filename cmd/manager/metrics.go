package main

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The metrics endpoint asks the API server who calls (TokenReview) and
// whether that caller may get /metrics (SubjectAccessReview), the way
// kubebuilder v4 scaffolds it. Both reviews are cluster-scoped, so these are
// the manager's only ClusterRole rules.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions serves /metrics over HTTPS behind the API server's
// authentication and authorisation unless --metrics-secure=false (plain HTTP,
// for a cluster that reaches it only through its own network policy).
func metricsOptions(o options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if !o.enableHTTP2 {
		m.TLSOpts = append(m.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	if o.metricsSecure {
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if o.metricsCertDir != "" {
		m.CertDir = o.metricsCertDir
	}
	return m
}
