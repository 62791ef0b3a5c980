package nodestack

// The in-process volume controller can be stopped and started again, as a
// manager process killed and restarted would be: nothing carries over but
// the cluster. Its writes go through an audit that records every delete,
// so a test can judge that each carried a UID precondition.

import (
	"context"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cellfleet/cellfleet/internal/controller/volume"
)

// controllerRun is the running controller: how to stop it and what it was
// started with.
type controllerRun struct {
	ports volume.PortRange
	stop  func()
}

// StopController stops the running volume controller (a no-op when none
// runs) and waits until it has.
func (s *Stack) StopController() {
	if s.controller.stop != nil {
		s.controller.stop()
		s.controller.stop = nil
	}
}

// RestartController stops the controller and starts a fresh one with the
// same replica ports.
func (s *Stack) RestartController() {
	s.T.Helper()
	ports := s.controller.ports
	s.StopController()
	s.StartController(ports)
}

// Delete is one delete the controller issued.
type Delete struct {
	Kind, Namespace, Name string
	UID                   string // the UID precondition, "" when it had none
}

func (d Delete) String() string {
	return fmt.Sprintf("delete %s %s/%s (uid precondition %q)", d.Kind, d.Namespace, d.Name, d.UID)
}

// deleteLog is every delete of every controller the stack ran.
type deleteLog struct {
	mu      sync.Mutex
	deletes []Delete
}

// Deletes lists the deletes the stack's controllers issued.
func (s *Stack) Deletes() []Delete {
	s.deletes.mu.Lock()
	defer s.deletes.mu.Unlock()
	return append([]Delete(nil), s.deletes.deletes...)
}

// audit wraps the controller's client.
func (s *Stack) audit(c client.Client) client.Client { return &auditClient{Client: c, log: &s.deletes} }

type auditClient struct {
	client.Client
	log *deleteLog
}

func (a *auditClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	do := &client.DeleteOptions{}
	do.ApplyOptions(opts)
	d := Delete{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if gvk, err := a.GroupVersionKindFor(obj); err == nil {
		d.Kind = gvk.Kind
	}
	if do.Preconditions != nil && do.Preconditions.UID != nil {
		d.UID = string(*do.Preconditions.UID)
	}
	a.log.mu.Lock()
	a.log.deletes = append(a.log.deletes, d)
	a.log.mu.Unlock()
	return a.Client.Delete(ctx, obj, opts...)
}
