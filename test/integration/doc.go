// Package integration holds the whole-stack tests of the storage half: the
// manager's CSI controller and volume controller, real replica-host
// processes, the real local driver per node and the replicated node plugin
// with a real mount owner, against one envtest API server. It is tests
// only; it may import every package of the module.
package integration
