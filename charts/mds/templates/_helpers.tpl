{{/* Labels on every object: the chart's own plus the part-of label the kustomize install carries too. */}}
{{- define "mds.labels" -}}
app.kubernetes.io/part-of: mds
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "mds.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The operator's options as MDS_* variables (the ConfigMap mds-operator-config). */}}
{{- define "mds.config" -}}
MDS_API_URL: {{ ternary (printf "http://mds-service.%s.svc:8080" .Release.Namespace) .Values.config.apiUrl .Values.service.enabled | quote }}
MDS_INSTANCE_ID: {{ .Values.config.instanceId | quote }}
MDS_LOG_LEVEL: {{ .Values.config.logLevel | quote }}
{{- with .Values.credentials.fallbackNamespaces }}
MDS_CREDENTIALS_FALLBACK_NAMESPACES: {{ join "," . | quote }}
{{- end }}
{{- range $k, $v := .Values.config.extra }}
{{ $k }}: {{ $v | toString | quote }}
{{- end }}
{{- end -}}

{{/*
What the operator calls, in the ClusterRole or (singleNamespace) the Role: derived from src/operator/ and
each kind's controller.ts under src/resources/; test/deploy/rbac-e2e.test.ts runs the operator with exactly these rules.
*/}}
{{- define "mds.operatorRules" -}}
# The custom resources: informers (list, watch); finalizers and annotations by merge patch on Projects and
# Databases; reads by name where the restore controller needs the live object (its target Database, itself).
- apiGroups: ["mds.dev"]
  resources: ["projects"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["mds.dev"]
  resources: ["databases"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["mds.dev"]
  resources: ["databaserestores"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["mds.dev"]
  resources: ["connections"]
  verbs: ["get", "list", "watch", "patch"]
# DatabaseBackups are created and deleted by BackupSchedules (one per slot; retention deletes the ones it took).
- apiGroups: ["mds.dev"]
  resources: ["databasebackups"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["mds.dev"]
  resources: ["backupschedules"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["mds.dev"]
  resources: ["projects/status", "databases/status", "databaserestores/status", "connections/status", "databasebackups/status", "backupschedules/status"]
  verbs: ["patch"]
# Connection Secrets are written, rebuilt and released; credentials Secrets are read.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}

{{/*
What following a rotation's consumers adds (rotationConsumers.enabled; deploy/components/rotation-consumers): read pods
and the workloads whose templates use a Secret, patch only those workloads (the restart annotation, server-side apply).
*/}}
{{- define "mds.rotationConsumersRules" -}}
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs: ["list", "watch", "patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
{{- end -}}
