{{/* Names and labels shared by every template. */}}

{{- define "wo.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* fullname is "<release>-wo" unless the release name already says wo. */}}
{{- define "wo.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "wo.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "wo.operatorName" -}}
{{- printf "%s-operator" (include "wo.fullname" .) -}}
{{- end -}}

{{- define "wo.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "wo.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "wo.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: wo
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "wo.operatorSelectorLabels" -}}
app.kubernetes.io/name: wo-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* wo.image renders repository:tag, the tag defaulting to appVersion; a
tag starting with @ is a digest. */}}
{{- define "wo.image" -}}
{{- $tag := default .root.Chart.AppVersion .image.tag -}}
{{- if hasPrefix "@" $tag -}}
{{- printf "%s%s" .image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* wo.seccompProfile renders a seccompProfile from {type, localhostProfile}. */}}
{{- define "wo.seccompProfile" -}}
type: {{ .type }}
{{- if eq .type "Localhost" }}
localhostProfile: {{ .localhostProfile | quote }}
{{- end }}
{{- end -}}
