{{/* The release's name for its objects, at most 63 characters. */}}
{{- define "outboxd.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "outboxd.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "outboxd.labels" -}}
{{ include "outboxd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "outboxd.secretName" -}}
{{- .Values.secret.existingSecret | default (include "outboxd.fullname" .) -}}
{{- end -}}

{{- define "outboxd.headlessName" -}}
{{- printf "%s-headless" (include "outboxd.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The outboxd container, without its name: the sidecar and the group's
StatefulSet add what differs between them.
*/}}
{{- define "outboxd.container" -}}
image: {{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
env:
  - name: OUTBOXD_TOKEN
    valueFrom:
      secretKeyRef:
        name: {{ include "outboxd.secretName" . }}
        key: {{ .Values.secret.tokenKey }}
  {{- with .Values.endpoints }}
  - name: OUTBOXD_ENDPOINTS
    value: {{ join " " . | quote }}
  {{- end }}
  {{- with .Values.goMemLimit }}
  - name: GOMEMLIMIT
    value: {{ . | quote }}
  {{- end }}
  {{- if eq .Values.mode "group" }}
  {{- include "outboxd.groupEnv" . | nindent 2 }}
  {{- end }}
  {{- with .Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
ports:
  - name: http
    containerPort: 8080
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  periodSeconds: 5
{{- with .Values.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.securityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
outboxd as a native sidecar (an init container that keeps running, Kubernetes
1.29 and later): started, and its startup probe passed, before the
application's containers; stopped after them.
*/}}
{{- define "outboxd.sidecarContainer" -}}
- name: outboxd
  restartPolicy: Always
  args:
    - serve
    {{- range .Values.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  {{- include "outboxd.container" . | nindent 2 }}
  startupProbe:
    httpGet:
      path: /healthz
      port: http
    periodSeconds: 1
    failureThreshold: 60
  volumeMounts:
    - name: outboxd-data
      mountPath: /data
{{- end -}}

{{- define "outboxd.sidecarVolume" -}}
- name: outboxd-data
  persistentVolumeClaim:
    claimName: {{ include "outboxd.fullname" . }}-data
{{- end -}}

{{- define "outboxd.podSpecCommon" -}}
automountServiceAccountToken: false
terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The group's settings, and the pod's name and namespace that its advertised address is made of. */}}
{{- define "outboxd.groupEnv" -}}
{{- $kafka := .Values.group.kafka -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: OUTBOXD_ENDPOINT_SECRET_KEY_FILE
  value: /etc/outboxd/keys/{{ .Values.secret.endpointSecretKeyKey }}
- name: OUTBOXD_KAFKA_BROKERS
  value: {{ join "," $kafka.brokers | quote }}
- name: OUTBOXD_KAFKA_TOPIC
  value: {{ $kafka.topic | quote }}
- name: OUTBOXD_KAFKA_GROUP
  value: {{ $kafka.group | quote }}
{{- with $kafka.destination }}
- name: OUTBOXD_KAFKA_DESTINATION
  value: {{ . | quote }}
{{- end }}
- name: OUTBOXD_STANDBY_REPLICAS
  value: {{ .Values.group.standbyReplicas | quote }}
{{- end -}}
