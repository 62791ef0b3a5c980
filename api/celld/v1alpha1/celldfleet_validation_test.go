package v1alpha1_test

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// with returns a spec built by base and changed by edits.
func with(base func() map[string]any, edits ...func(map[string]any)) map[string]any {
	spec := base()
	for _, e := range edits {
		e(spec)
	}
	return spec
}

// set sets the field at path (below spec) to v.
func set(v any, path ...string) func(map[string]any) {
	return func(spec map[string]any) {
		if err := unstructured.SetNestedField(spec, v, path...); err != nil {
			panic(fmt.Sprintf("set %v: %v", path, err))
		}
	}
}

// unset removes the field at path (below spec).
func unset(path ...string) func(map[string]any) {
	return func(spec map[string]any) { unstructured.RemoveNestedField(spec, path...) }
}

func zones(z ...string) []any {
	out := make([]any, len(z))
	for i, s := range z {
		out[i] = s
	}
	return out
}

func envVars(names ...string) []any {
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = map[string]any{"name": n, "value": "x"}
	}
	return out
}

const otherDigest = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

// TestCelldFleetCreateValidation proves each of the CelldFleet schema's rules:
// for each one, an object the API server accepts and one it rejects with a
// message that names the field and the rule.
func TestCelldFleetCreateValidation(t *testing.T) {
	cases := []struct {
		name string
		spec map[string]any
		want string // "" means accepted
	}{
		// profile: Bucket | PersistentFleet, required.
		{"profile PersistentFleet accepted", with(persistentSpec), ""},
		{"profile Bucket accepted", with(bucketSpec), ""},
		{"profile outside the enum rejected", with(bucketSpec, set("Ephemeral", "profile")), `spec.profile: Unsupported value: "Ephemeral"`},
		{"profile missing rejected", with(bucketSpec, unset("profile")), "spec.profile: Required value"},

		// bucketWorkload: Deployment | Ordered; Ordered only with Bucket.
		{"bucketWorkload Deployment with Bucket accepted", with(bucketSpec, set("Deployment", "bucketWorkload")), ""},
		{"bucketWorkload Ordered with Bucket accepted", with(bucketSpec, set("Ordered", "bucketWorkload")), ""},
		{"bucketWorkload Ordered with PersistentFleet rejected", with(persistentSpec, set("Ordered", "bucketWorkload")), "spec.bucketWorkload: Ordered is allowed only with profile Bucket"},
		{"bucketWorkload outside the enum rejected", with(bucketSpec, set("DaemonSet", "bucketWorkload")), `spec.bucketWorkload: Unsupported value: "DaemonSet"`},

		// replicas: 1 to 100.
		{"replicas 1 accepted", with(bucketSpec, set(int64(1), "replicas")), ""},
		{"replicas 100 accepted", with(bucketSpec, set(int64(100), "replicas")), ""},
		{"replicas 0 rejected", with(bucketSpec, set(int64(0), "replicas")), "spec.replicas in body should be greater than or equal to 1"},
		{"replicas 101 rejected", with(bucketSpec, set(int64(101), "replicas")), "spec.replicas in body should be less than or equal to 100"},

		// runtimeImage: required, registry/path@sha256:<64 hex>.
		{"runtimeImage with a registry port accepted", with(bucketSpec, set("localhost:5000/team/celld@"+otherDigest, "runtimeImage")), ""},
		{"runtimeImage by tag rejected", with(bucketSpec, set("registry.example.com/celld:0.5.1", "runtimeImage")), "spec.runtimeImage registry.example.com/celld:0.5.1 must be pinned by digest"},
		{"runtimeImage by tag and digest rejected", with(bucketSpec, set("registry.example.com/celld:0.5.1@"+otherDigest, "runtimeImage")), "spec.runtimeImage registry.example.com/celld:0.5.1@" + otherDigest + " must be pinned by digest"},
		{"runtimeImage without a registry path rejected", with(bucketSpec, set("celld@"+otherDigest, "runtimeImage")), "spec.runtimeImage celld@" + otherDigest + " must be pinned by digest"},
		{"runtimeImage with a short digest rejected", with(bucketSpec, set("registry.example.com/celld@sha256:abcdef", "runtimeImage")), "spec.runtimeImage registry.example.com/celld@sha256:abcdef must be pinned by digest"},
		{"runtimeImage with uppercase hex rejected", with(bucketSpec, set("registry.example.com/celld@sha256:ABCDEF9876543210fedcba9876543210fedcba9876543210fedcba9876543210", "runtimeImage")), "spec.runtimeImage registry.example.com/celld@sha256:ABCDEF9876543210fedcba9876543210fedcba9876543210fedcba9876543210 must be pinned by digest"},
		{"runtimeImage missing rejected", with(bucketSpec, unset("runtimeImage")), "spec.runtimeImage: Required value"},

		// maintenance.
		{"maintenance paused with a restart token accepted", with(bucketSpec, set(map[string]any{"paused": true, "restartToken": "2026-11-29T08:00"}, "maintenance")), ""},
		{"maintenance restartToken longer than 253 rejected", with(bucketSpec, set(string(make([]byte, 254)), "maintenance", "restartToken")), "spec.maintenance.restartToken: Too long"},

		// capacity: modes, bounds, step, replicas within bounds.
		{"capacity Automatic within bounds accepted", with(bucketSpec, set(map[string]any{"mode": "Automatic", "minReplicas": int64(2), "maxReplicas": int64(6), "step": int64(2)}, "capacity")), ""},
		{"capacity with min equal to max accepted", with(bucketSpec, set(map[string]any{"mode": "External", "minReplicas": int64(3), "maxReplicas": int64(3)}, "capacity")), ""},
		{"capacity mode outside the enum rejected", with(bucketSpec, set(map[string]any{"mode": "Manual", "maxReplicas": int64(6)}, "capacity")), `spec.capacity.mode: Unsupported value: "Manual"`},
		{"capacity mode missing rejected", with(bucketSpec, set(map[string]any{"maxReplicas": int64(6)}, "capacity")), "spec.capacity.mode: Required value"},
		{"capacity maxReplicas missing rejected", with(bucketSpec, set(map[string]any{"mode": "ScaleOut"}, "capacity")), "spec.capacity.maxReplicas: Required value"},
		{"capacity maxReplicas 101 rejected", with(bucketSpec, set(map[string]any{"mode": "ScaleOut", "maxReplicas": int64(101)}, "capacity")), "spec.capacity.maxReplicas in body should be less than or equal to 100"},
		{"capacity minReplicas 0 rejected", with(bucketSpec, set(map[string]any{"mode": "ScaleOut", "minReplicas": int64(0), "maxReplicas": int64(6)}, "capacity")), "spec.capacity.minReplicas in body should be greater than or equal to 1"},
		{"capacity minReplicas above maxReplicas rejected", with(bucketSpec, set(map[string]any{"mode": "Shadow", "minReplicas": int64(5), "maxReplicas": int64(4)}, "capacity")), "spec.capacity.minReplicas must be at most spec.capacity.maxReplicas"},
		{"capacity step wider than the bounds rejected", with(bucketSpec, set(map[string]any{"mode": "Automatic", "minReplicas": int64(2), "maxReplicas": int64(4), "step": int64(3)}, "capacity")), "spec.capacity.step must be at most spec.capacity.maxReplicas - spec.capacity.minReplicas"},
		{"capacity step 0 rejected", with(bucketSpec, set(map[string]any{"mode": "Automatic", "maxReplicas": int64(4), "step": int64(0)}, "capacity")), "spec.capacity.step in body should be greater than or equal to 1"},
		{"replicas below capacity minReplicas rejected", with(bucketSpec, set(map[string]any{"mode": "Automatic", "minReplicas": int64(4), "maxReplicas": int64(6)}, "capacity")), "spec.replicas must lie within spec.capacity.minReplicas and spec.capacity.maxReplicas"},
		{"replicas above capacity maxReplicas rejected", with(bucketSpec, set(int64(7), "replicas"), set(map[string]any{"mode": "Automatic", "maxReplicas": int64(6)}, "capacity")), "spec.replicas must lie within spec.capacity.minReplicas and spec.capacity.maxReplicas"},

		// serviceAccountName.
		{"serviceAccountName DNS subdomain accepted", with(bucketSpec, set("celld-runtime", "serviceAccountName")), ""},
		{"serviceAccountName with capitals rejected", with(bucketSpec, set("Celld_Runtime", "serviceAccountName")), "spec.serviceAccountName Celld_Runtime must be a DNS subdomain"},

		// storage.
		{"storage missing rejected", with(bucketSpec, unset("storage")), "spec.storage: Required value"},
		{"storage bucket missing rejected", with(bucketSpec, unset("storage", "bucket")), "spec.storage.bucket: Required value"},
		{"storage bucket with dots and region accepted", with(bucketSpec, set("fleet.bucket-01", "storage", "bucket"), set("eu-west-1", "storage", "region")), ""},
		{"storage bucket with capitals rejected", with(bucketSpec, set("Fleet_Bucket", "storage", "bucket")), "spec.storage.bucket Fleet_Bucket must be an S3 bucket name"},
		{"storage bucket shorter than 3 rejected", with(bucketSpec, set("ab", "storage", "bucket")), "spec.storage.bucket: Invalid value"},
		{"storage region with spaces rejected", with(bucketSpec, set("EU West", "storage", "region")), "spec.storage.region EU West must be lowercase letters and digits"},
		{"storage storageClassName missing with PersistentFleet rejected", with(persistentSpec, unset("storage", "storageClassName")), "spec.storage.storageClassName is required with profile PersistentFleet"},
		{"storage storageClassName with Bucket rejected", with(bucketSpec, set("fast-ssd", "storage", "storageClassName")), "spec.storage.storageClassName is allowed only with profile PersistentFleet"},
		{"storage storageClassName not a DNS subdomain rejected", with(persistentSpec, set("Fast SSD", "storage", "storageClassName")), "spec.storage.storageClassName Fast SSD must be a DNS subdomain"},
		{"storage sizeGiB missing with PersistentFleet rejected", with(persistentSpec, unset("storage", "sizeGiB")), "spec.storage.sizeGiB is required with profile PersistentFleet"},
		{"storage sizeGiB with Bucket rejected", with(bucketSpec, set(int64(10), "storage", "sizeGiB")), "spec.storage.sizeGiB is allowed only with profile PersistentFleet"},
		{"storage sizeGiB 0 rejected", with(persistentSpec, set(int64(0), "storage", "sizeGiB")), "spec.storage.sizeGiB in body should be greater than or equal to 1"},
		{"storage sizeGiB 65536 accepted", with(persistentSpec, set(int64(65536), "storage", "sizeGiB")), ""},

		// placement: azCount equals the number of zones, replicas ≥ azCount, mode.
		{"placement over three zones accepted", with(persistentSpec, set(map[string]any{"zones": zones("a", "b", "c"), "azCount": int64(3), "mode": "Relaxed"}, "placement")), ""},
		{"placement azCount not the number of zones rejected", with(persistentSpec, set(map[string]any{"zones": zones("a", "b", "c"), "azCount": int64(2)}, "placement")), "spec.placement.azCount must equal the number of spec.placement.zones"},
		{"replicas below placement azCount rejected", with(persistentSpec, set(int64(2), "replicas"), set(map[string]any{"zones": zones("a", "b", "c"), "azCount": int64(3)}, "placement")), "spec.replicas must be at least spec.placement.azCount"},
		{"placement mode outside the enum rejected", with(persistentSpec, set(map[string]any{"zones": zones("a"), "azCount": int64(1), "mode": "Loose"}, "placement")), `spec.placement.mode: Unsupported value: "Loose"`},
		{"placement duplicate zones rejected", with(persistentSpec, set(map[string]any{"zones": zones("a", "a"), "azCount": int64(2)}, "placement")), "spec.placement.zones[1]: Duplicate value"},
		{"placement without zones rejected", with(persistentSpec, set(map[string]any{"azCount": int64(1)}, "placement")), "spec.placement.zones: Required value"},

		// execution: each limit at least its request.
		{"execution limits above requests accepted", with(bucketSpec, set(map[string]any{
			"requests": map[string]any{"cpu": "500m", "memory": "512Mi"},
			"limits":   map[string]any{"cpu": int64(1), "memory": "512Mi"},
		}, "execution")), ""},
		{"execution cpu limit below request rejected", with(bucketSpec, set(map[string]any{
			"requests": map[string]any{"cpu": "500m"}, "limits": map[string]any{"cpu": "250m"},
		}, "execution")), "spec.execution.limits.cpu must be at least spec.execution.requests.cpu"},
		{"execution memory limit below request rejected", with(bucketSpec, set(map[string]any{
			"requests": map[string]any{"memory": "1Gi"}, "limits": map[string]any{"memory": "512Mi"},
		}, "execution")), "spec.execution.limits.memory must be at least spec.execution.requests.memory"},
		{"execution zero cpu rejected", with(bucketSpec, set(map[string]any{"requests": map[string]any{"cpu": "0"}}, "execution")), "cpu must be a positive quantity"},
		{"execution memory that is not a quantity rejected", with(bucketSpec, set(map[string]any{"requests": map[string]any{"memory": "lots"}}, "execution")), "spec.execution.requests.memory"},

		// lifecycle: terminationGraceSeconds ≥ shutdownSeconds + 5.
		{"lifecycle grace exactly shutdown plus 5 accepted", with(bucketSpec, set(map[string]any{"shutdownSeconds": int64(60), "terminationGraceSeconds": int64(65)}, "lifecycle")), ""},
		{"lifecycle grace below shutdown plus 5 rejected", with(bucketSpec, set(map[string]any{"shutdownSeconds": int64(60), "terminationGraceSeconds": int64(64)}, "lifecycle")), "spec.lifecycle.terminationGraceSeconds must be at least spec.lifecycle.shutdownSeconds + 5"},
		{"lifecycle shutdown raised past the default grace rejected", with(bucketSpec, set(map[string]any{"shutdownSeconds": int64(41)}, "lifecycle")), "spec.lifecycle.terminationGraceSeconds must be at least spec.lifecycle.shutdownSeconds + 5"},
		{"lifecycle shutdown 0 rejected", with(bucketSpec, set(map[string]any{"shutdownSeconds": int64(0)}, "lifecycle")), "spec.lifecycle.shutdownSeconds in body should be greater than or equal to 1"},

		// env: CELLD_* names, operator-owned names rejected, unique names.
		{"env user CELLD variables accepted", with(bucketSpec, set(envVars("CELLD_LOG_LEVEL", "CELLD_TTL_MS"), "env")), ""},
		{"env name without the CELLD_ prefix rejected", with(bucketSpec, set(envVars("AWS_REGION"), "env")), "spec.env[].name AWS_REGION must match CELLD_[A-Z0-9_]+"},
		{"env lowercase name rejected", with(bucketSpec, set(envVars("CELLD_log"), "env")), "spec.env[].name CELLD_log must match CELLD_[A-Z0-9_]+"},
		{"env duplicate names rejected", with(bucketSpec, set(envVars("CELLD_LOG_LEVEL", "CELLD_LOG_LEVEL"), "env")), "spec.env[1]: Duplicate value"},
	}
	for _, owned := range []string{"CELLD_NODE", "CELLD_ADVERTISE", "CELLD_BUCKET", "CELLD_DURABILITY", "CELLD_WATCH",
		"CELLD_ADDR", "CELLD_INTERNAL_ADDR", "CELLD_SHUTDOWN_TOTAL_MS"} {
		cases = append(cases, struct {
			name string
			spec map[string]any
			want string
		}{"env operator-owned " + owned + " rejected", with(bucketSpec, set(envVars(owned), "env")),
			"spec.env[].name: " + owned + " is set by the operator and cannot be overridden"})
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			obj := object(fleetGVK, sanitize(tc.name), tc.spec)
			obj.SetNamespace(testNamespace)
			err := env.Client.Create(ctx, obj)
			checkOutcome(t, "a CelldFleet where "+tc.name, err, tc.want)
			if err == nil {
				t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
			}
		})
	}
}

// TestCelldFleetUpdateValidation proves the immutability rules on update, and
// that the fields meant to change do.
func TestCelldFleetUpdateValidation(t *testing.T) {
	cases := []struct {
		name string
		base func() map[string]any
		edit func(map[string]any)
		want string
	}{
		{"profile change rejected", bucketSpec, set("PersistentFleet", "profile"), "spec.profile is immutable"},
		{"storage bucket change rejected", bucketSpec, set("other-bucket", "storage", "bucket"), "spec.storage is immutable"},
		{"storage region added rejected", bucketSpec, set("eu-west-1", "storage", "region"), "spec.storage is immutable"},
		{"storage sizeGiB change rejected", persistentSpec, set(int64(40), "storage", "sizeGiB"), "spec.storage is immutable"},
		{"storage class change rejected", persistentSpec, set("slow-hdd", "storage", "storageClassName"), "spec.storage is immutable"},
		{"bucketWorkload added rejected", bucketSpec, set("Ordered", "bucketWorkload"), "spec.bucketWorkload is immutable"},
		{"replicas change accepted", persistentSpec, set(int64(5), "replicas"), ""},
		{"runtimeImage change accepted", persistentSpec, set("registry.example.com/celld/celld@"+otherDigest, "runtimeImage"), ""},
		{"restartToken change accepted", persistentSpec, set("roll-1", "maintenance", "restartToken"), ""},
		{"pause accepted", persistentSpec, set(true, "maintenance", "paused"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			obj := object(fleetGVK, sanitize("update "+tc.name), tc.base())
			obj.SetNamespace(testNamespace)
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatalf("create the fleet to update: %v", err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
			spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
			tc.edit(spec)
			if err := unstructured.SetNestedMap(obj.Object, spec, "spec"); err != nil {
				t.Fatal(err)
			}
			checkOutcome(t, "an update where "+tc.name, env.Client.Update(ctx, obj), tc.want)
		})
	}

	t.Run("bucketWorkload change rejected", func(t *testing.T) {
		ctx := ctxT(t)
		obj := object(fleetGVK, "update-bucketworkload-change", with(bucketSpec, set("Deployment", "bucketWorkload")))
		obj.SetNamespace(testNamespace)
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create the fleet to update: %v", err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
		_ = unstructured.SetNestedField(obj.Object, "Ordered", "spec", "bucketWorkload")
		checkOutcome(t, "a change of bucketWorkload from Deployment to Ordered", env.Client.Update(ctx, obj), "spec.bucketWorkload is immutable")
	})
}
