package chartcheck

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The manager's metrics Service is always there (HTTPS 8443 to the metrics
// port); the ServiceMonitors, and the NODE components' Services, only with
// metrics.serviceMonitor.enabled, which needs the Prometheus Operator's CRD.
func TestChartServesMetricsAndRendersServiceMonitorsOnlyWhenAsked(t *testing.T) {
	objs := render(t)
	if sm := ofKind(objs, "ServiceMonitor"); len(sm) != 0 {
		t.Fatalf("by default the chart must render no ServiceMonitor (the CRD may be absent); got %v", sm)
	}
	svc := serviceNamed(t, objs, managerName+"-metrics")
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.String() != "metrics" ||
		svc.Spec.Selector["app.kubernetes.io/component"] != "manager" {
		t.Errorf("the manager's metrics Service must send 8443 to the manager's metrics port; got %+v", svc.Spec)
	}
	storage := serviceNamed(t, objs, storageControllerName+"-metrics")
	if len(storage.Spec.Ports) != 1 || storage.Spec.Ports[0].Port != 8443 || storage.Spec.Ports[0].TargetPort.String() != "metrics" ||
		storage.Spec.Selector["app.kubernetes.io/component"] != "storage-controller" {
		t.Errorf("the storage controller's metrics Service must send 8443 to its metrics port; got %+v", storage.Spec)
	}
	for _, d := range ofKind(objs, "Deployment") {
		deploy := string(d.raw)
		if !strings.Contains(deploy, "--metrics-bind-address=:8443") || strings.Contains(deploy, "--metrics-secure=false") {
			t.Errorf("%s must serve its metrics securely on :8443:\n%s", d.Name, deploy)
		}
	}

	on := render(t, "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prom")
	var names []string
	for _, o := range ofKind(on, "ServiceMonitor") {
		names = append(names, o.Name)
		var sm struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Endpoints []struct {
					Scheme          string `json:"scheme"`
					BearerTokenFile string `json:"bearerTokenFile"`
				} `json:"endpoints"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(o.raw, &sm); err != nil {
			t.Fatal(err)
		}
		if sm.Metadata.Labels["release"] != "prom" {
			t.Errorf("ServiceMonitor %s must carry metrics.serviceMonitor.labels", o.Name)
		}
		if (o.Name == managerName || o.Name == storageControllerName) && (len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Scheme != "https" || sm.Spec.Endpoints[0].BearerTokenFile == "") {
			t.Errorf("ServiceMonitor %s must scrape over HTTPS with a bearer token; got %+v", o.Name, sm.Spec)
		}
	}
	slices.Sort(names)
	if want := []string{"cellfleet-csi-node", managerName, "cellfleet-replica-host", storageControllerName}; !slices.Equal(names, want) {
		t.Fatalf("metrics.serviceMonitor.enabled must render ServiceMonitors %v; got %v", want, names)
	}
	for _, name := range []string{"cellfleet-replica-host-metrics", "cellfleet-csi-node-metrics"} {
		s := serviceNamed(t, on, name)
		if s.Spec.Selector["app.kubernetes.io/component"] != "node" || s.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("Service %s must be headless and select the NODE DaemonSet (app.kubernetes.io/component: node); got %+v", name, s.Spec)
		}
	}
}

func serviceNamed(t *testing.T, objs []object, name string) corev1.Service {
	t.Helper()
	for _, o := range ofKind(objs, "Service") {
		if o.Name == name {
			var s corev1.Service
			o.decode(t, &s)
			return s
		}
	}
	t.Fatalf("the chart renders no Service %s", name)
	return corev1.Service{}
}
