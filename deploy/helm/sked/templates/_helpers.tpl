{{/*
Names, labels and the pieces the three roles share. A role's helpers take a dict:
(dict "root" $ "component" "api"|"sweeper"|"worker").
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "sked.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: fullnameOverride, or <release>-<name> unless the release already names the chart. */}}
{{- define "sked.fullname" -}}
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

{{/* A role's object name: <fullname>-<component>. */}}
{{- define "sked.componentName" -}}
{{- printf "%s-%s" (include "sked.fullname" .root | trunc 54 | trimSuffix "-") .component }}
{{- end }}

{{/* name-version, for the helm.sh/chart label. */}}
{{- define "sked.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "sked.labels" -}}
helm.sh/chart: {{ include "sked.chart" . }}
{{ include "sked.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sked
{{- end }}

{{/* What a release's objects are selected by. */}}
{{- define "sked.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sked.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of a role's objects. */}}
{{- define "sked.componentLabels" -}}
{{ include "sked.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* What a role's pods are selected by (a Deployment's selector cannot change: keep it small). */}}
{{- define "sked.componentSelectorLabels" -}}
{{ include "sked.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "sked.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sked.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "sked.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The Secret holding the database URL(s), after checking that there is one. */}}
{{- define "sked.secretName" -}}
{{- if .Values.database.existingSecret }}
{{- .Values.database.existingSecret }}
{{- else if .Values.database.url }}
{{- include "sked.fullname" . }}
{{- else }}
{{- fail "sked: set database.url (postgres://…) or database.existingSecret (a Secret with the URL under database.urlKey)" }}
{{- end }}
{{- end }}

{{/* The Secret key of a role's database URL: database.roleKeys.<role>, or database.urlKey. */}}
{{- define "sked.urlKey" -}}
{{- $key := get .root.Values.database.roleKeys .component }}
{{- if and $key (not .root.Values.database.existingSecret) }}
{{- fail (printf "sked: database.roleKeys.%s names a key of database.existingSecret; the Secret this chart makes holds database.urlKey only" .component) }}
{{- end }}
{{- default .root.Values.database.urlKey $key }}
{{- end }}

{{/*
The worker's --grace: worker.payloadGraceSeconds, or terminationGracePeriodSeconds less
worker.shutdownMarginSeconds. Refuses a grace that would let the kubelet's SIGKILL land before
the worker has recorded its attempts (it waits at most --grace + 5 s after SIGTERM).
*/}}
{{- define "sked.workerGrace" -}}
{{- $period := int .Values.terminationGracePeriodSeconds }}
{{- $margin := int .Values.worker.shutdownMarginSeconds }}
{{- $grace := sub $period $margin }}
{{- if not (kindIs "invalid" .Values.worker.payloadGraceSeconds) }}
{{- $grace = int .Values.worker.payloadGraceSeconds }}
{{- end }}
{{- if lt $margin 5 }}
{{- fail "sked: worker.shutdownMarginSeconds must be at least 5 (the worker waits --grace + 5 s after SIGTERM)" }}
{{- end }}
{{- if or (lt $grace 0) (gt (add $grace $margin) $period) }}
{{- fail (printf "sked: worker --grace %d s + shutdown margin %d s exceeds terminationGracePeriodSeconds %d s" $grace $margin $period) }}
{{- end }}
{{- $grace }}
{{- end }}

{{/* KEDA's target: keda.targetQueryValue, or the attempts one worker pod runs at once. */}}
{{- define "sked.kedaTarget" -}}
{{- default (mul .Values.worker.workers .Values.worker.concurrency) .Values.keda.targetQueryValue }}
{{- end }}

{{/* Pod metadata of a role: labels, and a checksum that rolls the pods when the chart's Secret changes. */}}
{{- define "sked.podMetadata" -}}
labels:
  {{- include "sked.componentLabels" . | nindent 2 }}
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- if or .root.Values.podAnnotations (not .root.Values.database.existingSecret) }}
annotations:
  {{- if not .root.Values.database.existingSecret }}
  checksum/secret: {{ include (print .root.Template.BasePath "/secret.yaml") .root | sha256sum }}
  {{- end }}
  {{- with .root.Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* Pod-level settings every role shares (goes under a pod template's spec). */}}
{{- define "sked.podSpec" -}}
{{- $v := .root.Values -}}
serviceAccountName: {{ include "sked.serviceAccountName" .root }}
automountServiceAccountToken: {{ $v.serviceAccount.automountServiceAccountToken }}
terminationGracePeriodSeconds: {{ int $v.terminationGracePeriodSeconds }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $v.podSecurityContext | nindent 2 }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $v.topologySpread.enabled }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: {{ $v.topologySpread.topologyKey }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "sked.componentSelectorLabels" . | nindent 8 }}
{{- end }}
volumes:
  # sked's data directory (SKED_DATA_DIR) and /tmp: the only writable paths.
  - name: data
    emptyDir: {}
  - name: tmp
    emptyDir: {}
  {{- with $v.database.ca }}
  {{- if and .secret .configMap }}
  {{- fail "sked: set database.ca.secret or database.ca.configMap, not both" }}
  {{- end }}
  {{- if or .secret .configMap }}
  # The database's CA certificate (sslrootcert=/etc/sked/postgres-ca/ca.crt in the URL).
  - name: postgres-ca
    {{- if .secret }}
    secret:
      secretName: {{ .secret | quote }}
    {{- else }}
    configMap:
      name: {{ .configMap | quote }}
    {{- end }}
      items:
        - key: {{ .key | quote }}
          path: ca.crt
  {{- end }}
  {{- end }}
  {{- with $v.database.clientCertSecret }}
  # The client certificate for the database (sslcert/sslkey under /etc/sked/postgres-client/),
  # readable by the pod's fsGroup only.
  - name: postgres-client
    secret:
      secretName: {{ . | quote }}
      defaultMode: 0440
      items:
        - key: tls.crt
          path: tls.crt
        - key: tls.key
          path: tls.key
  {{- end }}
{{- end }}

{{/* Container-level settings every role shares (goes inside a container). */}}
{{- define "sked.containerCommon" -}}
{{- $v := .root.Values -}}
image: {{ include "sked.image" .root | quote }}
imagePullPolicy: {{ $v.image.pullPolicy }}
securityContext:
  {{- toYaml $v.securityContext | nindent 2 }}
env:
  # Every role stores everything in this PostgreSQL database (migrated on start).
  - name: SKED_DATABASE_URL
    valueFrom:
      secretKeyRef:
        name: {{ include "sked.secretName" .root }}
        key: {{ include "sked.urlKey" . }}
  {{- if and (eq .component "api") $v.operatorKey.existingSecret }}
  # The operator key of tenant default, made known to the database by every API pod.
  - name: SKED_OPERATOR_KEY
    valueFrom:
      secretKeyRef:
        name: {{ $v.operatorKey.existingSecret }}
        key: {{ $v.operatorKey.key }}
  {{- end }}
  - name: SKED_DATA_DIR
    value: /var/lib/sked
  {{- with $v.logs.s3 }}
  {{- if .bucket }}
  # Finished attempts' logs go to this bucket (rows of the database while they run).
  - name: SKED_LOG_BUCKET
    value: {{ .bucket | quote }}
  {{- if .endpoint }}
  - name: SKED_LOG_ENDPOINT
    value: {{ .endpoint | quote }}
  {{- end }}
  {{- if .region }}
  - name: AWS_REGION
    value: {{ .region | quote }}
  {{- end }}
  {{- if .existingSecret }}
  - name: AWS_ACCESS_KEY_ID
    valueFrom:
      secretKeyRef:
        name: {{ .existingSecret }}
        key: {{ .accessKeyIdKey }}
  - name: AWS_SECRET_ACCESS_KEY
    valueFrom:
      secretKeyRef:
        name: {{ .existingSecret }}
        key: {{ .secretAccessKeyKey }}
  {{- end }}
  {{- else if or .endpoint .existingSecret }}
  {{- fail "sked: logs.s3.endpoint and logs.s3.existingSecret need logs.s3.bucket (s3://bucket[/prefix])" }}
  {{- end }}
  {{- end }}
  - name: SKED_LOG_FORMAT
    value: {{ $v.log.format | quote }}
  - name: SKED_LOG
    value: {{ $v.log.filter | quote }}
  {{- with $v.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with (get $v .component).extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
volumeMounts:
  - name: data
    mountPath: /var/lib/sked
  - name: tmp
    mountPath: /tmp
  {{- if or $v.database.ca.secret $v.database.ca.configMap }}
  - name: postgres-ca
    mountPath: /etc/sked/postgres-ca
    readOnly: true
  {{- end }}
  {{- if $v.database.clientCertSecret }}
  - name: postgres-client
    mountPath: /etc/sked/postgres-client
    readOnly: true
  {{- end }}
{{- end }}

{{/* Liveness and readiness on a named port. */}}
{{- define "sked.probes" -}}
livenessProbe:
  httpGet:
    path: {{ .root.Values.probes.livenessPath }}
    port: {{ .port }}
  initialDelaySeconds: 10
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 6
readinessProbe:
  httpGet:
    path: {{ .root.Values.probes.readinessPath }}
    port: {{ .port }}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 3
{{- end }}

{{/* A role's PodDisruptionBudget. */}}
{{- define "sked.pdb" -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "sked.componentName" . }}
  labels:
    {{- include "sked.componentLabels" . | nindent 4 }}
spec:
  maxUnavailable: {{ (get .root.Values .component).pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "sked.componentSelectorLabels" . | nindent 6 }}
{{- end }}
