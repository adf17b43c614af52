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

{{- define "ccsweep.operator.serviceAccountName" -}}
{{- default (printf "%s-operator" (include "ccsweep.fullname" .)) .Values.operator.serviceAccount.name }}
{{- end }}

{{- define "ccsweep.nodeProbe.serviceAccountName" -}}
{{- default (printf "%s-node-probe" (include "ccsweep.fullname" .)) .Values.nodeProbe.serviceAccount.name }}
{{- end }}

{{- define "ccsweep.pushgateway" -}}
{{- default .Values.workflows.pushgateway .Values.metrics.scrapeConfig.target }}
{{- end }}

{{/* The S3 credentials as environment variables (names ccsweep.store reads). */}}
{{- define "ccsweep.s3Env" -}}
- name: CCSWEEP_S3_ACCESS_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.store.s3.secretName | quote }}, key: accessKey}}
- name: CCSWEEP_S3_SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.store.s3.secretName | quote }}, key: secretKey}}
- name: CCSWEEP_S3_ENDPOINT
  valueFrom: {secretKeyRef: {name: {{ .Values.store.s3.secretName | quote }}, key: endpoint}}
{{- end }}
