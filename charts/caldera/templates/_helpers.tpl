{{/* Names, labels and checks shared by the templates. */}}

{{/* The chart name, as `app.kubernetes.io/name`. */}}
{{- define "caldera.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of every object: the release name when it contains the chart name (release `caldera`
gives deploy/'s names: `caldera`, `caldera-config`, `caldera-metrics`, …), else
`<release>-<chart name>`. Suffixed names (`-leader-election`, `-gang-gate`) must stay within 63
characters, hence 45.
*/}}
{{- define "caldera.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 45 | trimSuffix "-" }}
{{- else }}
{{- $name := include "caldera.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 45 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 45 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "caldera.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object: deploy/'s two, plus Helm's. */}}
{{- define "caldera.labels" -}}
app.kubernetes.io/name: {{ include "caldera.name" . }}
app.kubernetes.io/part-of: caldera
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "caldera.chart" . }}
{{- end }}

{{/* What selects the scheduler's pods (Deployment, Service, PodDisruptionBudget, anti-affinity). */}}
{{- define "caldera.selectorLabels" -}}
app.kubernetes.io/name: {{ include "caldera.name" . }}
app.kubernetes.io/component: scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "caldera.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "caldera.configMapName" -}}
{{- default (printf "%s-config" (include "caldera.fullname" .)) .Values.existingConfigMap }}
{{- end }}

{{/* The Lease the binary elects its leader on (crates/cli/src/run.rs: `caldera`, GATE_LEASE). */}}
{{- define "caldera.lease" -}}
{{- if .Values.gateMode.enabled }}caldera-gate{{ else }}caldera{{ end }}
{{- end }}

{{/* Combinations the schema cannot express. */}}
{{- define "caldera.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicaCount > 1 needs leaderElection.enabled: without it every replica schedules and they bind the same pods" }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (gt (int .Values.replicaCount) 1) (ge (int .Values.podDisruptionBudget.minAvailable) (int .Values.replicaCount)) }}
{{- fail "podDisruptionBudget.minAvailable must be below replicaCount, or no replica could ever be evicted (node drains would hang)" }}
{{- end }}
{{- end }}
