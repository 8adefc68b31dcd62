{{/* Chart name, truncated to a DNS label. */}}
{{- define "outbox-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the release's objects. A release named like the chart does not
repeat the name ("outbox-operator", not "outbox-operator-outbox-operator").
*/}}
{{- define "outbox-operator.fullname" -}}
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

{{- define "outbox-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable for the life of the release (a Deployment's selector is immutable). */}}
{{- define "outbox-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "outbox-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "outbox-operator.labels" -}}
helm.sh/chart: {{ include "outbox-operator.chart" . }}
{{ include "outbox-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: outbox-operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "outbox-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "outbox-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "outbox-operator.leaseName" -}}
{{- default (printf "%s-leader" (include "outbox-operator.fullname" .)) .Values.leaderElection.leaseName }}
{{- end }}

{{/* repository:tag, or repository@digest when a digest is given. */}}
{{- define "outbox-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* A duration as the values schema allows it ("1h30m", "2.5s", "500ms"), in milliseconds. */}}
{{- define "outbox-operator.durationMs" -}}
{{- $total := 0.0 }}
{{- range regexFindAll "[0-9]+([.][0-9]+)?(ms|s|m|h)" . -1 }}
{{- $unit := regexFind "(ms|s|m|h)$" . }}
{{- $scale := get (dict "ms" 1.0 "s" 1000.0 "m" 60000.0 "h" 3600000.0) $unit }}
{{- $total = addf $total (mulf (float64 (trimSuffix $unit .)) $scale) }}
{{- end }}
{{- $total }}
{{- end }}

{{/*
The controller's own checks of the leader-election timing (as client-go's), made at
render time: otherwise a bad combination renders fine and every pod crash-loops.
*/}}
{{- define "outbox-operator.checkLeaderElection" -}}
{{- if .Values.leaderElection.enabled }}
{{- $le := .Values.leaderElection }}
{{- $lease := float64 (include "outbox-operator.durationMs" $le.leaseDuration) }}
{{- $renew := float64 (include "outbox-operator.durationMs" $le.renewDeadline) }}
{{- $retry := float64 (include "outbox-operator.durationMs" $le.retryPeriod) }}
{{- $values := printf "leaseDuration %s, renewDeadline %s, retryPeriod %s" $le.leaseDuration $le.renewDeadline $le.retryPeriod }}
{{- if lt $lease 1000.0 }}
{{- fail (printf "leaderElection.leaseDuration must be at least 1s (%s)" $values) }}
{{- end }}
{{- if le $retry 0.0 }}
{{- fail (printf "leaderElection.retryPeriod must be greater than zero (%s)" $values) }}
{{- end }}
{{- if ge (addf $renew $retry) $lease }}
{{- fail (printf "leaderElection.leaseDuration must be greater than renewDeadline + retryPeriod, or the operator refuses to start (%s)" $values) }}
{{- end }}
{{- if le $renew (mulf 1.2 $retry) }}
{{- fail (printf "leaderElection.renewDeadline must be greater than 1.2 x retryPeriod, or the operator refuses to start (%s)" $values) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Whether the cluster serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (GA in
1.30): discovery says so on a live install; `helm template` has no discovery of kinds, so
there the target version decides (--kube-version, default Helm's own).
*/}}
{{- define "outbox-operator.admissionPolicySupported" -}}
{{- if or (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version) -}}
true
{{- end -}}
{{- end }}
