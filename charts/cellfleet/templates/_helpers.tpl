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

{{- define "cellfleet.fleetName" -}}
{{- include "cellfleet.fullname" . }}-fleet
{{- end -}}

{{- define "cellfleet.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{- define "cellfleet.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The manager image, always by digest: the seed pins an immutable image and the
chart has no default one.
*/}}
{{- define "cellfleet.image" -}}
{{- $repo := required "image.repository is required: the chart has no default manager image" .Values.image.repository -}}
{{- $digest := required "image.digest is required: pin the manager image by digest (sha256:<64 hex>), never by tag" .Values.image.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" $digest) -}}
{{- fail (printf "image.digest=%q is not a sha256 digest (sha256:<64 lowercase hex>)" $digest) -}}
{{- end -}}
{{- printf "%s@%s" $repo $digest -}}
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
The rules of one generated role, read from files/rbac (copies of
config/rbac/{fleet,manager}/role.yaml that `make chart-sync` keeps and `make chart-check`
compares), so the chart grants exactly what controller-gen generated from the
markers and nothing more (seed 002). Call with (list $ "file" "Kind").
*/}}
{{- define "cellfleet.generatedRules" -}}
{{- $root := index . 0 -}}
{{- $file := index . 1 -}}
{{- $kind := index . 2 -}}
{{- $content := $root.Files.Get $file -}}
{{- if not $content -}}
{{- fail (printf "%s is missing from the chart: run make chart-sync" $file) -}}
{{- end -}}
{{- $rules := "" -}}
{{- range regexSplit "(?m)^---[ \t]*$" $content -1 -}}
{{- $doc := fromYaml . -}}
{{- if and $doc (eq (toString $doc.kind) $kind) -}}
{{- $rules = toYaml $doc.rules -}}
{{- end -}}
{{- end -}}
{{- if not $rules -}}
{{- fail (printf "%s has no %s with rules: run make chart-sync" $file $kind) -}}
{{- end -}}
{{- $rules -}}
{{- end -}}
