{{/* Names, labels and the image, shared by every template. */}}

{{- define "ccsweep.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release name, plus the chart name unless the release name already contains it. */}}
{{- define "ccsweep.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every resource; call with (dict "root" $ "component" "operator"). */}}
{{- define "ccsweep.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{ include "ccsweep.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: ccsweep
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels a selector matches on (stable across upgrades). */}}
{{- define "ccsweep.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ccsweep.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/* [registry/]repository:tag[@digest]: a digest pins the image even if the tag moves. */}}
{{- define "ccsweep.image" -}}
{{- $image := .Values.image }}
{{- $name := ternary (printf "%s/%s" $image.registry $image.repository) $image.repository (ne $image.registry "") }}
{{- printf "%s:%s" $name (default .Chart.AppVersion $image.tag) }}
{{- with $image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/* The images a cell pod may run, as one regular expression: the chart's image and
operator.allowedImages, each pattern's `.` as [.] and `*` as .*. The cell template's image
expression and the pods' admission policy both read it. */}}
{{- define "ccsweep.cellImagePattern" -}}
{{- $patterns := list }}
{{- range (prepend .Values.operator.allowedImages (include "ccsweep.image" .)) }}
{{- if not (regexMatch "^[A-Za-z0-9._:/@*-]+$" .) }}
{{- fail (printf "operator.allowedImages: %q: only letters, digits, . _ : / @ - and * may stand in an image pattern" .) }}
{{- end }}
{{- $patterns = append $patterns (. | replace "." "[.]" | replace "*" ".*") }}
{{- end }}
{{- printf "^(%s)$" (join "|" $patterns) }}
{{- end }}

{{- define "ccsweep.operator.serviceAccountName" -}}
{{- default (printf "%s-operator" (include "ccsweep.fullname" .)) .Values.operator.serviceAccount.name }}
{{- end }}

{{- define "ccsweep.nodeProbe.serviceAccountName" -}}
{{- default (printf "%s-node-probe" (include "ccsweep.fullname" .)) .Values.nodeProbe.serviceAccount.name }}
{{- end }}

{{- define "ccsweep.pushgateway" -}}
{{- default .Values.workflows.pushgateway .Values.metrics.scrapeConfig.target }}
{{- end }}

{{/* The S3 settings as environment variables (names ccsweep.store reads): the keys and endpoint from
the Secret, or, with no Secret (store.s3.secretName ""), the endpoint alone, and the credentials
from the S3 client's provider chain: the pod's cloud identity (IRSA, Workload Identity). */}}
{{- define "ccsweep.s3Env" -}}
{{- if .Values.store.s3.secretName }}
- name: CCSWEEP_S3_ACCESS_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.store.s3.secretName | quote }}, key: accessKey}}
- name: CCSWEEP_S3_SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.store.s3.secretName | quote }}, key: secretKey}}
- name: CCSWEEP_S3_ENDPOINT
  valueFrom: {secretKeyRef: {name: {{ .Values.store.s3.secretName | quote }}, key: endpoint}}
{{- else }}
- name: CCSWEEP_S3_ENDPOINT
  value: {{ include "ccsweep.s3EndpointWithoutSecret" . | quote }}
{{- end }}
{{- end }}

{{/* The endpoint when no Secret holds it: store.s3.endpoint, which is then required. */}}
{{- define "ccsweep.s3EndpointWithoutSecret" -}}
{{- if .Values.store.s3.create }}
{{- fail "store.s3.create needs store.s3.secretName: the Secret it creates needs a name" }}
{{- end }}
{{- required "store.s3.endpoint: required when store.s3.secretName is empty (keys from the provider chain, the endpoint from this value)" .Values.store.s3.endpoint }}
{{- end }}

{{/* A pod template's metadata: the component's labels (which win over podLabels) plus its podLabels,
and its podAnnotations. Call with (dict "root" $ "component" "operator" "values" $.Values.operator). */}}
{{- define "ccsweep.podMetadata" -}}
{{- $labels := merge (include "ccsweep.labels" . | fromYaml) (deepCopy (.values.podLabels | default dict)) }}
labels:
  {{- toYaml $labels | nindent 2 }}
{{- with .values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A ServiceAccount's annotations (cloud identity: IRSA's eks.amazonaws.com/role-arn, GKE's
iam.gke.io/gcp-service-account); call with the serviceAccount values. */}}
{{- define "ccsweep.serviceAccountAnnotations" -}}
{{- with .annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The rule groups of monitoring/rules.yml (the dashboards' recording rules), each with
metrics.rules.interval when set, plus the alert group when metrics.alerts.enabled. */}}
{{- define "ccsweep.ruleGroups" -}}
{{- $groups := (.Files.Get "files/monitoring/rules.yml" | fromYaml).groups }}
{{- if .Values.metrics.alerts.enabled }}
{{- $groups = append $groups (include "ccsweep.alertGroup" . | fromYaml) }}
{{- end }}
{{- with .Values.metrics.rules.interval }}
{{- range $groups }}
{{- $_ := set . "interval" $.Values.metrics.rules.interval }}
{{- end }}
{{- end }}
{{- toYaml (dict "groups" $groups) }}
{{- end }}

{{/* Alerts on the recorded sweep series: a sweep that stopped finishing cells, and one whose
failed or late cells pass a share of the cells it runs. */}}
{{- define "ccsweep.alertGroup" -}}
{{- $a := .Values.metrics.alerts }}
name: ccsweep-alerts
rules:
  - alert: CcsweepSweepStalled
    expr: |
      sweep:ccsweep_progress:ratio < 1
      and on (sweep) changes(sweep:ccsweep_progress:ratio[{{ $a.stalledMinutes }}m]) == 0
      and on (sweep) (time() - max by (sweep) (ccsweep_sweep_started_timestamp_seconds)) > {{ mul $a.stalledMinutes 60 }}
    for: 5m
    labels:
      {{- toYaml $a.labels | nindent 6 }}
    annotations:
      summary: {{ printf "Sweep {{ $labels.sweep }} finished no cell in %d minutes" (int $a.stalledMinutes) | quote }}
      description: "Cells are left but none finished: pods Pending (no node offers the algorithm, a quota), or the workflow stopped. See the sweep's Argo workflow and `kubectl get sweep`."
  - alert: CcsweepCellsFailing
    expr: |
      sweep:ccsweep_cells:failed
      / on (sweep) (sweep:ccsweep_cells:total - sweep:ccsweep_cells:cached > 0)
      > {{ $a.failedRatio }}
    for: 1m
    labels:
      {{- toYaml $a.labels | nindent 6 }}
    annotations:
      summary: {{ printf "Sweep {{ $labels.sweep }}: {{ $value | humanizePercentage }} of its cells failed (threshold %v)" $a.failedRatio | quote }}
      description: "Failed cells are kept as attempts in the store with their error; `ccsweep status` lists them."
  - alert: CcsweepCellsLate
    expr: |
      sweep:ccsweep_cells_late:count
      / on (sweep) (sweep:ccsweep_cells:total - sweep:ccsweep_cells:cached > 0)
      > {{ $a.lateRatio }}
    for: 1m
    labels:
      {{- toYaml $a.labels | nindent 6 }}
    annotations:
      summary: {{ printf "Sweep {{ $labels.sweep }}: {{ $value | humanizePercentage }} of its cells ran late (threshold %v)" $a.lateRatio | quote }}
      description: "A late cell's emulator missed its release times (CPU contention on the node): give cells more CPU or run fewer per node."
{{- end }}

{{/*
The stores and Pushgateways a Sweep (the operator) or a Workflow's parameters (every workflow pod's
ccsweep) may name: the chart's own and those its values list, as the environment both read.
*/}}
{{- define "ccsweep.endpointAllowlists" -}}
- name: CCSWEEP_ALLOWED_STORES
  value: {{ prepend .Values.operator.allowedStores .Values.store.url | join "," | quote }}
- name: CCSWEEP_ALLOWED_PUSHGATEWAYS
  value: {{ compact (prepend .Values.operator.allowedPushgateways .Values.workflows.pushgateway) | join "," | quote }}
{{- end }}
