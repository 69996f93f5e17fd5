{{/*
metadata: of every object. Called with a dict: root (the chart's context), name, app and component (the
app.kubernetes.io/name and /component labels; empty: none), namespaced (true: in the release namespace)
or namespace (in that one), labels (more labels, e.g. prometheusOperator.labels). The chart's own labels win over commonLabels.
*/}}
{{- define "gpu-autoscaler.metadata" -}}
{{- $root := .root -}}
{{- $labels := dict "app.kubernetes.io/part-of" "gpu-autoscaler" "app.kubernetes.io/managed-by" $root.Release.Service "app.kubernetes.io/instance" $root.Release.Name "helm.sh/chart" (printf "%s-%s" $root.Chart.Name $root.Chart.Version) -}}
{{- with .app }}{{ $_ := set $labels "app.kubernetes.io/name" . }}{{ end -}}
{{- with .component }}{{ $_ := set $labels "app.kubernetes.io/component" . }}{{ end -}}
{{- $labels = merge $labels (.labels | default dict) $root.Values.commonLabels -}}
metadata:
  name: {{ .name | quote }}
  {{- if .namespace }}
  namespace: {{ .namespace | quote }}
  {{- else if .namespaced }}
  namespace: {{ $root.Release.Namespace | quote }}
  {{- end }}
  labels:
    {{- toYaml $labels | nindent 4 }}
  {{- with $root.Values.commonAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/* The pod template's metadata: the selector's labels, the component, then podLabels / podAnnotations. */}}
{{- define "gpu-autoscaler.podMetadata" -}}
metadata:
  labels:
    {{- toYaml (merge (dict "app.kubernetes.io/name" .app "app.kubernetes.io/component" .component) .values.podLabels) | nindent 4 }}
  {{- with .values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/* The image reference, unquoted (callers quote it): repository:tag, and @digest when one is given. */}}
{{- define "gpu-autoscaler.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/* Scheduling of a pod: node selector, affinity, tolerations, priority class, from the component's values. */}}
{{- define "gpu-autoscaler.scheduling" -}}
{{- with .priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The web config Secret mounted read-only (webConfig.enabled): the volume and the mount. */}}
{{- define "gpu-autoscaler.webConfigVolume" -}}
- name: web-config
  secret:
    secretName: {{ .Values.webConfig.secretName | quote }}
    defaultMode: 0440
{{- end }}
{{- define "gpu-autoscaler.webConfigMount" -}}
- name: web-config
  mountPath: /etc/gpu-autoscaler-web
  readOnly: true
{{- end }}

{{/* A NetworkPolicy: only Prometheus pods reach the metrics port of the pods named `app`. */}}
{{- define "gpu-autoscaler.ingressPolicy" -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
{{ include "gpu-autoscaler.metadata" (dict "root" .root "name" .app "app" .app "component" .component "namespaced" true) }}
spec:
  podSelector:
    matchLabels:
      app.kubernetes.io/name: {{ .app | quote }}
  policyTypes: ["Ingress"]
  ingress:
    - from:
        - namespaceSelector: {}
          podSelector:
            matchLabels:
              {{- toYaml .root.Values.networkPolicy.prometheusPodLabels | nindent 14 }}
      ports:
        - port: {{ .port | int }}
          protocol: TCP
{{- end }}

{{/* A ServiceMonitor keeping the exporter's holder labels (see manifests/overlays/prometheus-operator). */}}
{{- define "gpu-autoscaler.serviceMonitor" -}}
{{- $root := .root -}}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
{{ include "gpu-autoscaler.metadata" (dict "root" $root "name" .app "app" .app "component" .component "namespaced" true "labels" $root.Values.prometheusOperator.labels) }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .app | quote }}
  namespaceSelector:
    matchNames: [{{ $root.Release.Namespace | quote }}]
  endpoints:
    - port: metrics
      interval: 15s
      scrapeTimeout: 10s
      honorLabels: true
      relabelings:
        {{- if eq .app "gpu-exporter" }}
        - sourceLabels: [__meta_kubernetes_pod_node_name]
          targetLabel: node
        {{- end }}
        - sourceLabels: [namespace]
          targetLabel: exporter_namespace
        - sourceLabels: [pod]
          targetLabel: exporter_pod
        - sourceLabels: [container]
          targetLabel: exporter_container
        - action: labeldrop
          regex: namespace|pod|container
      {{- if $root.Values.webConfig.enabled }}
      scheme: https
      tlsConfig:
        ca:
          secret:
            name: {{ $root.Values.webConfig.secretName | quote }}
            key: ca.crt
        serverName: {{ printf "%s.%s.svc" .app $root.Release.Namespace | quote }}
      basicAuth:
        username:
          name: {{ $root.Values.webConfig.scrapeAuthSecretName | quote }}
          key: username
        password:
          name: {{ $root.Values.webConfig.scrapeAuthSecretName | quote }}
          key: password
      {{- end }}
{{- end }}
