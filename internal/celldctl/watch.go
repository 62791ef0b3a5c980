package celldctl

// --watch: follow changes after the first print. Each watch starts at the
// resourceVersion of a list taken before the first print, so a change made
// while the first print is fetched is still seen (at worst printed twice),
// and the server does not replay every existing object as ADDED.
//
// A watch ends when the context ends (Ctrl-C), when --request-timeout passes
// (the HTTP client cuts the stream) or when the server ends it; like
// kubectl get --watch, the command then returns without error.

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// watchTarget is one kind of object a --watch follows, narrowed by opts.
type watchTarget struct {
	list client.ObjectList
	opts []client.ListOption
}

// openWatch starts one watch at the current resourceVersion of its target.
func openWatch(ctx context.Context, c client.WithWatch, t watchTarget) (watch.Interface, error) {
	probe := t.list.DeepCopyObject().(client.ObjectList)
	if err := c.List(ctx, probe, append([]client.ListOption{client.Limit(1)}, t.opts...)...); err != nil {
		return nil, fmt.Errorf("list %T to start watching: %w", t.list, err)
	}
	opts := append([]client.ListOption{&client.ListOptions{Raw: &metav1.ListOptions{
		ResourceVersion: probe.GetResourceVersion()}}}, t.opts...)
	w, err := c.Watch(ctx, t.list, opts...)
	if err != nil {
		return nil, fmt.Errorf("watch %T: %w", t.list, err)
	}
	return w, nil
}

// follower is a set of open watches read as one stream.
type follower struct {
	watches []watch.Interface
	events  chan watch.Event
	// closed receives once for every watch whose stream ended.
	closed chan struct{}
	quit   chan struct{}
}

// follow opens a watch on every target. Call it before the first print, and
// run on the returned follower after it.
func follow(ctx context.Context, c client.WithWatch, targets ...watchTarget) (*follower, error) {
	f := &follower{events: make(chan watch.Event), closed: make(chan struct{}, len(targets)), quit: make(chan struct{})}
	for _, t := range targets {
		w, err := openWatch(ctx, c, t)
		if err != nil {
			f.stop()
			return nil, err
		}
		f.watches = append(f.watches, w)
		go f.forward(w)
	}
	return f, nil
}

func (f *follower) forward(w watch.Interface) {
	for ev := range w.ResultChan() {
		select {
		case f.events <- ev:
		case <-f.quit:
			return
		}
	}
	f.closed <- struct{}{}
}

func (f *follower) stop() {
	close(f.quit)
	for _, w := range f.watches {
		w.Stop()
	}
}

// run calls onChange with each changed object until the context ends or a
// watch ends, and stops the watches. An error event from the server (for
// example a resourceVersion too old) is returned.
func (f *follower) run(ctx context.Context, onChange func(watch.EventType, runtime.Object) error) error {
	defer f.stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.closed:
			return nil
		case ev := <-f.events:
			switch ev.Type {
			case watch.Error:
				return fmt.Errorf("watch: %w", apierrors.FromObject(ev.Object))
			case watch.Bookmark:
				continue
			}
			if err := onChange(ev.Type, ev.Object); err != nil {
				return err
			}
		}
	}
}
