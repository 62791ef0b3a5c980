package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// write is one API write the operator issued.
type write struct {
	op, kind, name string
	preconditions  bool   // a Delete carried a UID precondition
	resourceVer    bool   // a Delete carried a resourceVersion precondition
	force          bool   // a Delete with grace period 0
	orphan         bool   // a Delete with propagation Orphan
	uid            string // the UID a Delete's precondition names
}

func (w write) String() string { return fmt.Sprintf("%s %s/%s", w.op, w.kind, w.name) }

// fault says what an injected fault does to one write.
type fault int

const (
	passThrough fault = iota
	failWrite         // the write is refused before it reaches the API server
	loseReply         // the write happens, the reply does not arrive
)

var errInjected = errors.New("injected fault: connection reset")

// recordingClient is the operator's client: it records every write (so a
// test can fail when the operator deletes what it must not) and lets a test
// inject a fault into any write.
type recordingClient struct {
	client.Client
	mu     sync.Mutex
	writes []write
	// inject, when set, decides each write's fault; before, when set, runs
	// just before a write reaches the API server (to race it).
	inject func(w write) fault
	before func(w write)
	// afterList, when set, runs after each List the operator makes through
	// this client (its observation), as if the cluster moved on right after
	// the operator looked.
	afterList func(list client.ObjectList)
}

func (r *recordingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := r.Client.List(ctx, list, opts...)
	r.mu.Lock()
	after := r.afterList
	r.mu.Unlock()
	if err == nil && after != nil {
		after(list)
	}
	return err
}

func kindName(c client.Client, obj client.Object) string {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return gvk.Kind
}

func (r *recordingClient) do(w write, call func() error) error {
	r.mu.Lock()
	r.writes = append(r.writes, w)
	inject, before := r.inject, r.before
	r.mu.Unlock()
	f := passThrough
	if inject != nil {
		f = inject(w)
	}
	if f == failWrite {
		return fmt.Errorf("%s: %w", w, errInjected)
	}
	if before != nil {
		before(w)
	}
	err := call()
	if f == loseReply && err == nil {
		return fmt.Errorf("%s: reply lost: %w", w, errInjected)
	}
	return err
}

func (r *recordingClient) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes, r.inject, r.before, r.afterList = nil, nil, nil, nil
}

func (r *recordingClient) recorded() []write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]write(nil), r.writes...)
}

// deletesOf are the recorded deletes of one kind.
func (r *recordingClient) deletesOf(kind string) []write {
	var out []write
	for _, w := range r.recorded() {
		if w.op == "delete" && w.kind == kind {
			out = append(out, w)
		}
	}
	return out
}

func (r *recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return r.do(write{op: "create", kind: kindName(r.Client, obj), name: obj.GetName()}, func() error { return r.Client.Create(ctx, obj, opts...) })
}

func (r *recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return r.do(write{op: "update", kind: kindName(r.Client, obj), name: obj.GetName()}, func() error { return r.Client.Update(ctx, obj, opts...) })
}

func (r *recordingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	return r.do(write{op: "patch", kind: kindName(r.Client, obj), name: obj.GetName()}, func() error { return r.Client.Patch(ctx, obj, p, opts...) })
}

func (r *recordingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	o := &client.DeleteOptions{}
	o.ApplyOptions(opts)
	w := write{op: "delete", kind: kindName(r.Client, obj), name: obj.GetName()}
	if o.Preconditions != nil {
		w.preconditions = o.Preconditions.UID != nil
		if w.preconditions {
			w.uid = string(*o.Preconditions.UID)
		}
		w.resourceVer = o.Preconditions.ResourceVersion != nil
	}
	w.force = o.GracePeriodSeconds != nil && *o.GracePeriodSeconds == 0
	w.orphan = o.PropagationPolicy != nil && *o.PropagationPolicy == metav1.DeletePropagationOrphan
	return r.do(w, func() error { return r.Client.Delete(ctx, obj, opts...) })
}

func (r *recordingClient) Status() client.SubResourceWriter {
	return &recordingStatus{SubResourceWriter: r.Client.Status(), r: r}
}

type recordingStatus struct {
	client.SubResourceWriter
	r *recordingClient
}

func (s *recordingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.r.do(write{op: "status", kind: kindName(s.r.Client, obj), name: obj.GetName()}, func() error {
		return s.SubResourceWriter.Update(ctx, obj, opts...)
	})
}

// eventLog records the operator's events.
type eventLog struct {
	mu      sync.Mutex
	reasons []string
	notes   []string
}

func (e *eventLog) Eventf(_ runtime.Object, _ runtime.Object, _, reason, _, note string, args ...interface{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reasons = append(e.reasons, reason)
	e.notes = append(e.notes, fmt.Sprintf(note, args...))
}

func (e *eventLog) has(reason string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.reasons {
		if r == reason {
			return true
		}
	}
	return false
}
