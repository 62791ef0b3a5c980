// Package celldctl is the kubectl-celld plugin (`kubectl celld`): its cobra
// commands, built on k8s.io/cli-runtime so they take the flags every kubectl
// user already types (--kubeconfig, --context, -n, --as, --request-timeout,
// ...) and print the way kubectl prints (-o wide|json|yaml|name|jsonpath,
// --watch). It reports one fleet's members, disks, holds, conditions and
// events, and each replicated volume's robustness, coordinator and replicas.
//
// It only reads the Kubernetes API (get, list, watch); it never writes.
//
// It must never import controller packages: the plugin shows what the cluster
// reports, not what a controller would decide.
package celldctl
