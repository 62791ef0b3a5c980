package fleet

// Services <fleet> (the application port) and headless <fleet>-peers (the
// stable peer DNS names of PersistentFleet members). The operator creates them,
// then only verifies them; it updates one only to fill fields a newer release
// declares on an otherwise exactly matching operator-created Service. Any other
// difference, in a field the operator renders or one that routes traffic
// (externalIPs, sessionAffinityConfig, ipFamilies, trafficDistribution), is
// InfrastructureBlocked naming the field: a Service someone changed may route
// clients somewhere the operator cannot see (docs/fleet-operator.md,
// "Profiles").

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
			IPFamilyPolicy:        ptr.To(corev1.IPFamilyPolicySingleStack),
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
			IPFamilyPolicy:           ptr.To(corev1.IPFamilyPolicySingleStack),
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
// declares (port appProtocol, internalTrafficPolicy, ipFamilyPolicy, the
// operator's labels) filled in where they are absent, and a description of
// any other difference from want, naming the field ("" if none). The
// operator sets no Service annotation, so annotations are left to others.
func fillDeclaredServiceFields(got, want *corev1.Service) (*corev1.Service, string) {
	out := got.DeepCopy()
	if diff := fillLabels(out, want); diff != "" {
		return nil, diff
	}
	if diff := serviceSpecDiff(&out.Spec, &want.Spec); diff != "" {
		return nil, diff
	}
	if diff := fillPointer(&out.Spec.InternalTrafficPolicy, want.Spec.InternalTrafficPolicy, "internalTrafficPolicy"); diff != "" {
		return nil, diff
	}
	if diff := fillPointer(&out.Spec.IPFamilyPolicy, want.Spec.IPFamilyPolicy, "ipFamilyPolicy"); diff != "" {
		return nil, diff
	}
	for i, w := range want.Spec.Ports {
		g := &out.Spec.Ports[i]
		if g.Name != w.Name || g.Port != w.Port || g.TargetPort != w.TargetPort || g.Protocol != w.Protocol || g.NodePort != w.NodePort {
			return nil, fmt.Sprintf("port %d is %s %d→%s/%s, not %s %d→%s/%s", i,
				g.Name, g.Port, g.TargetPort.String(), g.Protocol, w.Name, w.Port, w.TargetPort.String(), w.Protocol)
		}
		if diff := fillPointer(&g.AppProtocol, w.AppProtocol, "port "+g.Name+" appProtocol"); diff != "" {
			return nil, diff
		}
	}
	return out, ""
}

// fillLabels adds want's labels missing from out; a label of the operator's
// with another value is a difference.
func fillLabels(out, want *corev1.Service) string {
	for k, v := range want.Labels {
		cur, ok := out.Labels[k]
		switch {
		case !ok && out.Labels == nil:
			out.Labels = map[string]string{k: v}
		case !ok:
			out.Labels[k] = v
		case cur != v:
			return fmt.Sprintf("label %s is %q, not %q", k, cur, v)
		}
	}
	return ""
}

// fillPointer fills a declared field that is absent; a value other than the
// rendered one is a difference naming field.
func fillPointer[T comparable](got **T, want *T, field string) string {
	switch {
	case *got == nil:
		*got = want
	case want == nil || **got != *want:
		return fmt.Sprintf("%s is %v", field, **got)
	}
	return ""
}

// serviceSpecDiff names the first field, other than those a newer release
// declares, that differs from what the operator renders: type, headlessness,
// selector, publishNotReadyAddresses, session affinity and its config,
// externalIPs, externalTrafficPolicy, ipFamilies (one family, the cluster's:
// the operator renders SingleStack), trafficDistribution and the port count.
func serviceSpecDiff(got, want *corev1.ServiceSpec) string {
	headless := func(s *corev1.ServiceSpec) bool { return s.ClusterIP == corev1.ClusterIPNone }
	switch {
	case got.Type != want.Type:
		return fmt.Sprintf("type is %s, not %s", got.Type, want.Type)
	case headless(want) && !headless(got):
		return "it is not headless"
	case !headless(want) && headless(got):
		return "it is headless"
	case !maps.Equal(got.Selector, want.Selector):
		return fmt.Sprintf("selector is %v, not %v", got.Selector, want.Selector)
	case got.PublishNotReadyAddresses != want.PublishNotReadyAddresses:
		return fmt.Sprintf("publishNotReadyAddresses is %t, not %t", got.PublishNotReadyAddresses, want.PublishNotReadyAddresses)
	case got.SessionAffinity != want.SessionAffinity:
		return fmt.Sprintf("sessionAffinity is %q, not %q", got.SessionAffinity, want.SessionAffinity)
	case !reflect.DeepEqual(got.SessionAffinityConfig, want.SessionAffinityConfig):
		return fmt.Sprintf("sessionAffinityConfig is %v, not unset", got.SessionAffinityConfig)
	case len(got.ExternalIPs) != 0: // before externalTrafficPolicy, which the API server sets with it
		return fmt.Sprintf("externalIPs is %v, not empty", got.ExternalIPs)
	case got.ExternalTrafficPolicy != want.ExternalTrafficPolicy:
		return fmt.Sprintf("externalTrafficPolicy is %q, not %q", got.ExternalTrafficPolicy, want.ExternalTrafficPolicy)
	case len(got.IPFamilies) > 1:
		return fmt.Sprintf("ipFamilies is %v, not a single family", got.IPFamilies)
	case !reflect.DeepEqual(got.TrafficDistribution, want.TrafficDistribution):
		return fmt.Sprintf("trafficDistribution is %q, not unset", ptr.Deref(got.TrafficDistribution, ""))
	case len(got.Ports) != len(want.Ports):
		return fmt.Sprintf("it has %d ports, not %d", len(got.Ports), len(want.Ports))
	}
	return ""
}
