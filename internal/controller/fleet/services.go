package fleet

// Services <fleet> (the application port) and headless <fleet>-peers (the
// stable peer DNS names of PersistentFleet members). Seed 002: the operator
// creates them, then only verifies them; it updates one only to fill fields a
// newer release declares on an otherwise exactly matching operator-created
// Service. Any other difference is InfrastructureBlocked: a Service someone
// changed may route clients somewhere the operator cannot see.

import (
	"context"
	"fmt"
	"maps"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func renderServices(f *celldv1alpha1.CelldFleet) []*corev1.Service {
	port := func(name string, n int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: n, TargetPort: intstr.FromString(name), Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("http")}
	}
	app := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(f), Namespace: f.Namespace, Labels: objectLabels(f)},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeClusterIP,
			Selector:              selectorLabels(f),
			Ports:                 []corev1.ServicePort{port(appPortName, appPort)},
			SessionAffinity:       corev1.ServiceAffinityNone,
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
	peers := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: peersName(f), Namespace: f.Namespace, Labels: objectLabels(f)},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: corev1.ClusterIPNone,
			Selector:  selectorLabels(f),
			Ports:     []corev1.ServicePort{port(peerPortName, peerPort)},
			// Members find each other before they are Ready: readiness waits on
			// recovery from peers.
			PublishNotReadyAddresses: true,
			SessionAffinity:          corev1.ServiceAffinityNone,
			InternalTrafficPolicy:    ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
	return []*corev1.Service{app, peers}
}

func (r *Reconciler) convergeServices(ctx context.Context, f *celldv1alpha1.CelldFleet) (*finding, error) {
	for _, want := range renderServices(f) {
		got := &corev1.Service{}
		err := r.client.Get(ctx, client.ObjectKeyFromObject(want), got)
		if apierrors.IsNotFound(err) {
			if err := controllerutil.SetControllerReference(f, want, r.scheme); err != nil {
				return nil, fmt.Errorf("own Service %s: %w", want.Name, err)
			}
			if err := r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("create Service %s: %w", want.Name, err)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read Service %s: %w", want.Name, err)
		}
		if !metav1.IsControlledBy(got, f) {
			return blocked(celldv1alpha1.ReasonInfrastructureBlocked,
				"Service %s exists but was not created by this fleet; delete or rename it", want.Name), nil
		}
		filled, diff := fillDeclaredServiceFields(got, want)
		if diff != "" {
			return blocked(celldv1alpha1.ReasonInfrastructureBlocked,
				"Service %s differs from what the operator renders (%s); restore it or delete it so the operator recreates it", want.Name, diff), nil
		}
		if !reflect.DeepEqual(filled, got) {
			if err := r.client.Update(ctx, filled); err != nil {
				return nil, fmt.Errorf("fill declared fields of Service %s: %w", want.Name, err)
			}
		}
	}
	return nil, nil
}

// fillDeclaredServiceFields returns got with the fields a newer release
// declares (port appProtocol, internalTrafficPolicy, the operator's labels)
// filled in where they are absent, and a description of any other difference
// from want in a field the operator renders ("" if none): type, headlessness,
// selector, publishNotReadyAddresses, session affinity, traffic policies and
// ports. The operator sets no Service annotation, so annotations are left to
// others.
func fillDeclaredServiceFields(got, want *corev1.Service) (*corev1.Service, string) {
	out := got.DeepCopy()
	for k, v := range want.Labels {
		if cur, ok := out.Labels[k]; !ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		} else if cur != v {
			return nil, fmt.Sprintf("label %s is %q, not %q", k, cur, v)
		}
	}
	switch {
	case out.Spec.Type != want.Spec.Type:
		return nil, fmt.Sprintf("type is %s, not %s", out.Spec.Type, want.Spec.Type)
	case want.Spec.ClusterIP == corev1.ClusterIPNone && out.Spec.ClusterIP != corev1.ClusterIPNone:
		return nil, "it is not headless"
	case !maps.Equal(out.Spec.Selector, want.Spec.Selector):
		return nil, fmt.Sprintf("selector is %v, not %v", out.Spec.Selector, want.Spec.Selector)
	case out.Spec.PublishNotReadyAddresses != want.Spec.PublishNotReadyAddresses:
		return nil, fmt.Sprintf("publishNotReadyAddresses is %t, not %t", out.Spec.PublishNotReadyAddresses, want.Spec.PublishNotReadyAddresses)
	case out.Spec.SessionAffinity != want.Spec.SessionAffinity:
		return nil, fmt.Sprintf("sessionAffinity is %q, not %q", out.Spec.SessionAffinity, want.Spec.SessionAffinity)
	case out.Spec.ExternalTrafficPolicy != want.Spec.ExternalTrafficPolicy:
		return nil, fmt.Sprintf("externalTrafficPolicy is %q, not %q", out.Spec.ExternalTrafficPolicy, want.Spec.ExternalTrafficPolicy)
	case len(out.Spec.Ports) != len(want.Spec.Ports):
		return nil, fmt.Sprintf("it has %d ports, not %d", len(out.Spec.Ports), len(want.Spec.Ports))
	}
	switch got, w := out.Spec.InternalTrafficPolicy, want.Spec.InternalTrafficPolicy; {
	case got == nil:
		out.Spec.InternalTrafficPolicy = w
	case w == nil || *got != *w:
		return nil, fmt.Sprintf("internalTrafficPolicy is %q", *got)
	}
	for i, w := range want.Spec.Ports {
		g := &out.Spec.Ports[i]
		if g.Name != w.Name || g.Port != w.Port || g.TargetPort != w.TargetPort || g.Protocol != w.Protocol {
			return nil, fmt.Sprintf("port %d is %s %d→%s/%s, not %s %d→%s/%s", i,
				g.Name, g.Port, g.TargetPort.String(), g.Protocol, w.Name, w.Port, w.TargetPort.String(), w.Protocol)
		}
		switch {
		case g.AppProtocol == nil:
			g.AppProtocol = w.AppProtocol
		case w.AppProtocol == nil || *g.AppProtocol != *w.AppProtocol:
			return nil, fmt.Sprintf("port %s appProtocol is %q", g.Name, *g.AppProtocol)
		}
	}
	return out, ""
}
