#!/usr/bin/env bash
# rbac-gen.sh generates one set of RBAC manifests per controller package, so
# each component's ClusterRole is exactly as narrow as its markers say (seed
# 002: the fleet ClusterRole covers only the fleet API and StorageClass reads).
set -euo pipefail
cg=$1
gen() { # package-dir role-name output-dir
  local pkg=$1 role=$2 out=$3
  [[ -d $pkg ]] || return 0
  mkdir -p "$out"
  "$cg" rbac:roleName="$role" paths="./$pkg/..." output:rbac:artifacts:config="$out"
}
gen cmd/manager manager config/rbac/manager
gen internal/controller/fleet cellfleet-fleet config/rbac/fleet
gen internal/controller/volume cellfleet-volume config/rbac/volume
gen internal/csi/replicated/controller cellfleet-csi-controller config/rbac/csi-controller
gen internal/replica/kubehost cellfleet-replica-host config/rbac/replica-host
