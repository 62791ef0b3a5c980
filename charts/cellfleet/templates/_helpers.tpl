{{/*
The prefix of every object name: "<release>" when the release name already
says cellfleet, "<release>-cellfleet" otherwise. Cluster-scoped names
(ClusterRole, ClusterRoleBinding) carry it, so two releases never collide.
*/}}
{{- define "cellfleet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cellfleet.managerName" -}}
{{- include "cellfleet.fullname" . }}-manager
{{- end -}}

{{/*
The storage controller: its Deployment and its ServiceAccount (docs/install.md,
"Two Deployments").
*/}}
{{- define "cellfleet.storageControllerName" -}}
{{- include "cellfleet.fullname" . }}-storage-controller
{{- end -}}

{{- define "cellfleet.storageControllerSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: storage-controller
{{- end -}}

{{- define "cellfleet.fleetName" -}}
{{- include "cellfleet.fullname" . }}-fleet
{{- end -}}

{{- define "cellfleet.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{- define "cellfleet.nodeSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node
{{- end -}}

{{- define "cellfleet.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
An image reference, always by digest: the seed pins immutable images and the
chart has no default one. Call with (list "valuesKey" .Values.<key> "what").
*/}}
{{- define "cellfleet.imageRef" -}}
{{- $key := index . 0 -}}
{{- $img := index . 1 -}}
{{- $what := index . 2 -}}
{{- $repo := required (printf "%s.repository is required: the chart has no default %s image" $key $what) $img.repository -}}
{{- $digest := required (printf "%s.digest is required: pin the %s image by digest (sha256:<64 hex>), never by tag" $key $what) $img.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" $digest) -}}
{{- fail (printf "%s.digest=%q is not a sha256 digest (sha256:<64 lowercase hex>)" $key $digest) -}}
{{- end -}}
{{- printf "%s@%s" $repo $digest -}}
{{- end -}}

{{- define "cellfleet.image" -}}
{{- include "cellfleet.imageRef" (list "image" .Values.image "manager") -}}
{{- end -}}

{{/*
The image of one storage component: (list $ "csiNode").
*/}}
{{- define "cellfleet.storageImage" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- include "cellfleet.imageRef" (list (printf "storageImages.%s" $name) (index $root.Values.storageImages $name) $name) -}}
{{- end -}}

{{- define "cellfleet.nodeName" -}}
{{- include "cellfleet.fullname" . }}-node
{{- end -}}

{{/*
The storage namespace (--storage-namespace): the NODE DaemonSet, the
VolumeReplicas, backing claims and the Secrets nodes read. It must differ from
the release namespace, which alone holds the volumes' CA keys.
*/}}
{{- define "cellfleet.storageNamespace" -}}
{{- if eq .Values.storageNamespace .Release.Namespace -}}
{{- fail (printf "storageNamespace=%s is the release namespace: the nodes read the storage namespace's Secrets, so the volumes' CA keys would be readable by them" .Values.storageNamespace) -}}
{{- end -}}
{{- .Values.storageNamespace -}}
{{- end -}}

{{/*
fleetNamespaces as a --fleet-namespaces value. The fleet Role deletes Pods and
claims in each fleet namespace; in the storage namespace those are the NODE
Pods and the replicated volumes' backing claims, so a fleet namespace that is
the storage namespace is refused here, as the manager refuses it at start.
*/}}
{{- define "cellfleet.fleetNamespaces" -}}
{{- $storageNS := include "cellfleet.storageNamespace" . -}}
{{- if has $storageNS .Values.fleetNamespaces -}}
{{- fail (printf "fleetNamespaces includes %s, the storage namespace (storageNamespace): the fleet Role would let the fleet operator delete the NODE Pods and the replicated volumes' backing claims there" $storageNS) -}}
{{- end -}}
{{- join "," .Values.fleetNamespaces -}}
{{- end -}}

{{/*
memberReplacementDelay as a --member-replacement-delay value. values.schema.json
admits only whole hours, minutes and seconds ("90s", "10m", "1h30m"); this adds
the seed's minimum of one minute, which a pattern cannot say clearly. The
manager refuses a shorter delay at start too, but a chart that renders one
would install a manager that crash-loops.
*/}}
{{- define "cellfleet.memberReplacementDelay" -}}
{{- $d := toString .Values.memberReplacementDelay -}}
{{- if or (eq $d "") (not (regexMatch "^([0-9]{1,4}h)?([0-9]{1,6}m)?([0-9]{1,8}s)?$" $d)) -}}
{{- fail (printf "memberReplacementDelay=%q is not a duration of whole hours, minutes and seconds such as 90s, 10m or 1h30m" $d) -}}
{{- end -}}
{{- $h := regexFind "[0-9]+h" $d | trimSuffix "h" | default "0" | atoi -}}
{{- $m := regexFind "[0-9]+m" $d | trimSuffix "m" | default "0" | atoi -}}
{{- $s := regexFind "[0-9]+s" $d | trimSuffix "s" | default "0" | atoi -}}
{{- $seconds := add (mul $h 3600) (mul $m 60) $s -}}
{{- if lt $seconds 60 -}}
{{- fail (printf "memberReplacementDelay=%s is below the minimum of 1m: a shorter delay would replace members that can still come back on their own disks" $d) -}}
{{- end -}}
{{- $d -}}
{{- end -}}

{{/*
The rules of one role, read from files/rbac (copies of the role.yaml files under config/
that `make chart-sync` keeps and `make chart-check` compares), so the chart
grants exactly what the generated (or, for the upstream sidecars, the
reviewed) roles say and nothing more (seed 002). Call with
(list $ "file" "Kind") when the file holds one role of that kind, or
(list $ "file" "Kind" "name" "namespace") to pick one by its name and
namespace there ("" matches any namespace).
*/}}
{{- define "cellfleet.generatedRules" -}}
{{- $root := index . 0 -}}
{{- $file := index . 1 -}}
{{- $kind := index . 2 -}}
{{- $name := "" -}}
{{- $namespace := "" -}}
{{- if gt (len .) 3 }}{{ $name = index . 3 }}{{ end -}}
{{- if gt (len .) 4 }}{{ $namespace = index . 4 }}{{ end -}}
{{- $content := $root.Files.Get $file -}}
{{- if not $content -}}
{{- fail (printf "%s is missing from the chart: run make chart-sync" $file) -}}
{{- end -}}
{{- $rules := "" -}}
{{- range regexSplit "(?m)^---[ \t]*$" $content -1 -}}
{{- $doc := fromYaml . -}}
{{- if and $doc (eq (toString $doc.kind) $kind) -}}
{{- $meta := $doc.metadata | default dict -}}
{{- if and (or (eq $name "") (eq (toString $meta.name) $name)) (or (eq $namespace "") (eq (toString $meta.namespace) $namespace)) -}}
{{- $rules = toYaml $doc.rules -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $rules -}}
{{- fail (printf "%s has no %s %s with rules: run make chart-sync" $file $kind (trimPrefix "/" (printf "%s/%s" $namespace $name))) -}}
{{- end -}}
{{- $rules -}}
{{- end -}}
