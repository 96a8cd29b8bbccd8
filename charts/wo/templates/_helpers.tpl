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

{{/* wo.workerName is the name of the Worker the chart creates
(worker.create): the Worker template and NOTES.txt both name it. */}}
{{- define "wo.workerName" -}}
{{- default (include "wo.fullname" .) .Values.worker.name -}}
{{- end -}}

{{/* wo.validate fails the render on what values.schema.json cannot refuse
with a message that says what is wrong (its `not` only says "'not'
failed"), and on values that are wrong only together. It renders nothing;
worker.yaml includes it whether or not worker.create is set, so a bad value
fails every install. The reserved names are the CRD's (api/v1alpha1, the
env CEL rule), which would refuse them later, from the operator's side. */}}
{{- define "wo.validate" -}}
{{- $w := .Values.worker -}}
{{- with $w.voters -}}
{{- if eq (mod (int .) 2) 0 -}}
{{- fail (printf "at '/worker/voters': %d is even; voters must be odd (1, 3, 5, ...): a quorum is a majority, and 4 voters survive losing 1, no more than 3 do" (int .)) -}}
{{- end -}}
{{- end -}}
{{- $reserved := list "WO_SHARDS" "WO_PIN" "WO_IO" "WO_REDUCTIONS" "WO_DATA_DIR" "WO_PEERS" "WO_ORDINAL" "WO_CLUSTER_STATE" "WO_PEER_ADDR" "WO_PEER_CERT" "WO_PEER_KEY" "WO_PEER_CA" "WO_ADMIN_TOKEN_FILE" -}}
{{- range $i, $e := $w.env -}}
{{- if has $e.name $reserved -}}
{{- fail (printf "at '/worker/env/%d/name': %s is set by the operator (from resources, pinning, io, reductions, storage and the raft group it manages); remove it from worker.env" $i $e.name) -}}
{{- end -}}
{{- end -}}
{{- $watched := .Values.operator.watchNamespace -}}
{{- if and $w.create $watched (ne $watched .Release.Namespace) -}}
{{- fail (printf "worker.create renders Worker %s in the release's namespace %s, but operator.watchNamespace=%s: the operator would never reconcile it. Install the release in namespace %s, or set operator.watchNamespace to %s (or empty: every namespace)" (include "wo.workerName" .) .Release.Namespace $watched $watched .Release.Namespace) -}}
{{- end -}}
{{- end -}}
