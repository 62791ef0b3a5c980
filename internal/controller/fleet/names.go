package fleet

import (
	"fmt"
	"strconv"
	"strings"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// Ports and paths of the celld runtime contract (docs/fleet-operator.md,
// "The celld runtime contract").
const (
	appPort        = 8080
	peerPort       = 8081
	appPortName    = "app"
	peerPortName   = "peer"
	healthPath     = "/.well-known/celld/health"
	workDir        = "/work"
	containerName  = "celld"
	dataVolumeName = "data"
)

// Operator-internal metadata (not part of the API: nothing outside this
// package reads it).
const (
	// annotationTemplateHash records the hash of the rendered workload spec,
	// so an unchanged fleet costs no write.
	annotationTemplateHash = "celld.eric.dev/template-hash"
	labelAppName           = "app.kubernetes.io/name"
	labelAppInstance       = "app.kubernetes.io/instance"
	labelManagedBy         = "app.kubernetes.io/managed-by"
	appName                = "celld"
	managerName            = "cellfleet"
	zoneTopologyKey        = "topology.kubernetes.io/zone"
	hostnameTopologyKey    = "kubernetes.io/hostname"
)

func workloadName(f *celldv1alpha1.CelldFleet) string { return f.Name }
func serviceName(f *celldv1alpha1.CelldFleet) string  { return f.Name }
func peersName(f *celldv1alpha1.CelldFleet) string    { return f.Name + "-peers" }

// memberName is the Pod name of a member: <fleet>-<ordinal>.
func memberName(f *celldv1alpha1.CelldFleet, ordinal int32) string {
	return fmt.Sprintf("%s-%d", f.Name, ordinal)
}

// claimName is the member's claim: data-<fleet>-<ordinal>.
func claimName(f *celldv1alpha1.CelldFleet, ordinal int32) string {
	return dataVolumeName + "-" + memberName(f, ordinal)
}

// ordinalOf parses a member Pod's ordinal from its name; ok is false for a
// name that is not <fleet>-<n>.
func ordinalOf(f *celldv1alpha1.CelldFleet, podName string) (int32, bool) {
	rest, found := strings.CutPrefix(podName, f.Name+"-")
	if !found {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != rest {
		return 0, false
	}
	return int32(n), true
}

// selectorLabels select a fleet's member Pods.
func selectorLabels(f *celldv1alpha1.CelldFleet) map[string]string {
	return map[string]string{celldv1alpha1.LabelFleet: f.Name}
}

// objectLabels go on everything the operator renders.
func objectLabels(f *celldv1alpha1.CelldFleet) map[string]string {
	return map[string]string{
		celldv1alpha1.LabelFleet: f.Name,
		labelAppName:             appName,
		labelAppInstance:         f.Name,
		labelManagedBy:           managerName,
	}
}

func persistent(f *celldv1alpha1.CelldFleet) bool {
	return f.Spec.Profile == celldv1alpha1.ProfilePersistentFleet
}

// ordered says whether the fleet runs as a StatefulSet of Bucket members.
func ordered(f *celldv1alpha1.CelldFleet) bool {
	return f.Spec.Profile == celldv1alpha1.ProfileBucket && f.Spec.BucketWorkload == celldv1alpha1.BucketWorkloadOrdered
}

// statefulSetFleet is every fleet whose members are StatefulSet Pods.
func statefulSetFleet(f *celldv1alpha1.CelldFleet) bool { return persistent(f) || ordered(f) }

func paused(f *celldv1alpha1.CelldFleet) bool {
	return f.Spec.Maintenance != nil && f.Spec.Maintenance.Paused
}
