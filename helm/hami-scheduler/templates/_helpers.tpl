{{/* Names ------------------------------------------------------------------------------------------------ */}}

{{- define "hami-scheduler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami-scheduler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hami-scheduler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hami-scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: hami-scheduler
{{- end -}}

{{- define "hami-scheduler.labels" -}}
helm.sh/chart: {{ include "hami-scheduler.chart" . }}
{{ include "hami-scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "hami-scheduler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hami-scheduler.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Name of cluster-scoped objects (ClusterRole, ClusterRoleBindings, MutatingWebhookConfiguration): the release
     namespace is part of it, so neither a second release nor HAMi's own chart (ClusterRole hami-scheduler) can
     collide. */}}
{{- define "hami-scheduler.clusterName" -}}
{{- printf "%s-%s" (include "hami-scheduler.fullname" .) .Release.Namespace | trunc 200 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami-scheduler.webhookServiceName" -}}
{{- printf "%s-webhook" (include "hami-scheduler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami-scheduler.metricsServiceName" -}}
{{- printf "%s-metrics" (include "hami-scheduler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Service the API server calls for admission: every replica, or the leader only. */}}
{{- define "hami-scheduler.admissionServiceName" -}}
{{- if .Values.webhook.allReplicasService -}}
{{- include "hami-scheduler.webhookServiceName" . -}}
{{- else -}}
{{- include "hami-scheduler.fullname" . -}}
{{- end -}}
{{- end -}}

{{- define "hami-scheduler.serviceHost" -}}
{{- printf "%s.%s.svc" (include "hami-scheduler.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* DNS names the serving certificate must carry (the Services, short and long forms, and the webhook's
     customURL host when it is a name). */}}
{{- define "hami-scheduler.tlsDnsNames" -}}
{{- $ns := .Release.Namespace -}}
{{- range $svc := list (include "hami-scheduler.fullname" .) (include "hami-scheduler.webhookServiceName" .) (include "hami-scheduler.metricsServiceName" .) }}
- {{ $svc }}
- {{ printf "%s.%s" $svc $ns }}
- {{ printf "%s.%s.svc" $svc $ns }}
- {{ printf "%s.%s.svc.cluster.local" $svc $ns }}
{{- end }}
{{- $custom := .Values.webhook.customURL }}
{{- if and $custom.enabled (not (regexMatch "^[0-9.]+$|:" $custom.host)) }}
- {{ $custom.host }}
{{- end }}
{{- end -}}

{{/* IP addresses the serving certificate must carry: loopback, and the webhook's customURL host when it is
     an address. */}}
{{- define "hami-scheduler.tlsIPs" -}}
- 127.0.0.1
{{- $custom := .Values.webhook.customURL }}
{{- if and $custom.enabled (regexMatch "^[0-9.]+$|:" $custom.host) (ne $custom.host "127.0.0.1") }}
- {{ $custom.host }}
{{- end }}
{{- end -}}

{{- define "hami-scheduler.tlsSecretName" -}}
{{- if .Values.tls.existingSecret -}}
{{- .Values.tls.existingSecret -}}
{{- else -}}
{{- printf "%s-tls" (include "hami-scheduler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "hami-scheduler.servingCertificateName" -}}
{{- printf "%s-serving" (include "hami-scheduler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami-scheduler.deviceConfigMapName" -}}
{{- if .Values.deviceConfig.existingConfigMap -}}
{{- .Values.deviceConfig.existingConfigMap -}}
{{- else -}}
{{- printf "%s-device" (include "hami-scheduler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Images -------------------------------------------------------------------------------------------------- */}}

{{- define "hami-scheduler.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "hami-scheduler.kubeSchedulerImage" -}}
{{- $tag := .Values.kubeScheduler.image.tag -}}
{{- if not $tag -}}
{{- $tag = regexReplaceAll "^(v[0-9]+\\.[0-9]+\\.[0-9]+).*$" .Capabilities.KubeVersion.Version "${1}" -}}
{{- end -}}
{{- printf "%s:%s" .Values.kubeScheduler.image.repository $tag -}}
{{- end -}}

{{/* Leader election ----------------------------------------------------------------------------------------- */}}

{{/* "true" when leader election is on: enabled in values or forced by replicas > 1; "" otherwise. */}}
{{- define "hami-scheduler.leaderElect" -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.replicas) 1) -}}true{{- end -}}
{{- end -}}

{{- define "hami-scheduler.acquireMode" -}}
{{- if and (include "hami-scheduler.leaderElect" .) (eq .Values.leaderElection.mode "acquire") -}}true{{- end -}}
{{- end -}}

{{/* kube-scheduler's Lease (followed by the worker in follow mode). */}}
{{- define "hami-scheduler.leaseName" -}}
{{- default .Values.schedulerName .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The worker's own Lease in acquire mode; never equal to kube-scheduler's. */}}
{{- define "hami-scheduler.acquireLeaseName" -}}
{{- $name := default (printf "%s-extender" (include "hami-scheduler.leaseName" .)) .Values.leaderElection.acquireLeaseName -}}
{{- if eq $name (include "hami-scheduler.leaseName" .) -}}
{{- fail "leaderElection.acquireLeaseName must differ from kube-scheduler's Lease (leaderElection.leaseName or schedulerName): two different electors cannot share one Lease" -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/* The Lease the worker uses: kube-scheduler's (follow) or its own (acquire). */}}
{{- define "hami-scheduler.workerLeaseName" -}}
{{- if include "hami-scheduler.acquireMode" . -}}
{{- include "hami-scheduler.acquireLeaseName" . -}}
{{- else -}}
{{- include "hami-scheduler.leaseName" . -}}
{{- end -}}
{{- end -}}

{{/* Where kube-scheduler reaches the extender: its own pod (follow) or the leader through the Service (acquire). */}}
{{- define "hami-scheduler.extenderURL" -}}
{{- if include "hami-scheduler.acquireMode" . -}}
{{- printf "https://%s:%d" (include "hami-scheduler.serviceHost" .) (int .Values.extender.schedulerPort) -}}
{{- else -}}
{{- printf "https://127.0.0.1:%d" (int .Values.extender.schedulerPort) -}}
{{- end -}}
{{- end -}}

{{/* Where the server of kube-scheduler's verbs listens: only where kube-scheduler calls it (issue 11). */}}
{{- define "hami-scheduler.extenderBind" -}}
{{- printf "%s:%d" (ternary "0.0.0.0" "127.0.0.1" (eq (include "hami-scheduler.acquireMode" .) "true")) (int .Values.extender.schedulerPort) -}}
{{- end -}}

{{/* The registration worker's probe: GET /healthz on the pod IP when it listens there, else from inside the
     container (python -m workers.probe; the kubelet cannot reach 127.0.0.1). Called with "true" or "". */}}
{{- define "hami-scheduler.workerProbe" -}}
{{- if . -}}
httpGet:
  path: /healthz
  port: worker-metrics
  scheme: HTTP
{{- else -}}
exec:
  command: ["python", "-m", "workers.probe"]
{{- end -}}
{{- end -}}

{{/* "true" when something scrapes the registration worker: its metrics then listen on the pod IP. */}}
{{- define "hami-scheduler.workerMetricsExposed" -}}
{{- if or .Values.serviceMonitor.enabled .Values.networkPolicy.metricsFrom -}}true{{- end -}}
{{- end -}}

{{/* Durations ------------------------------------------------------------------------------------------------ */}}

{{/* Milliseconds in a Go duration string such as 1m30s or 500ms (as a float). */}}
{{- define "hami-scheduler.durationMs" -}}
{{- $units := dict "ns" 0.000001 "us" 0.001 "µs" 0.001 "ms" 1.0 "s" 1000.0 "m" 60000.0 "h" 3600000.0 -}}
{{- $total := 0.0 -}}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" (toString .) -1 -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $part -}}
{{- $total = addf $total (mulf (float64 $number) (get $units (trimPrefix $number $part))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* Refuses timing values that would fail at start or make kube-scheduler cut binds off. */}}
{{- define "hami-scheduler.checkTimings" -}}
{{- $lease := include "hami-scheduler.durationMs" .Values.leaderElection.leaseDuration | float64 -}}
{{- $renew := include "hami-scheduler.durationMs" .Values.leaderElection.renewDeadline | float64 -}}
{{- $retry := include "hami-scheduler.durationMs" .Values.leaderElection.retryPeriod | float64 -}}
{{- if not (gt $lease $renew) -}}
{{- fail "leaderElection.leaseDuration must be greater than leaderElection.renewDeadline" -}}
{{- end -}}
{{- if not (gt $renew (mulf $retry 1.2)) -}}
{{- fail "leaderElection.renewDeadline must be greater than 1.2 x leaderElection.retryPeriod" -}}
{{- end -}}
{{- if or (lt $retry 1000.0) (ge $retry 10000.0) -}}
{{- fail "leaderElection.retryPeriod must be at least 1s and below 10s (the worker heartbeat, written every retry period, is stale after 10s)" -}}
{{- end -}}
{{- $http := include "hami-scheduler.durationMs" .Values.kubeScheduler.httpTimeout | float64 -}}
{{- $bind := include "hami-scheduler.durationMs" .Values.extender.bindLockWait | float64 -}}
{{- $sync := include "hami-scheduler.durationMs" .Values.extender.filterSyncWait | float64 -}}
{{- if lt $http (addf $sync 5000.0) -}}
{{- fail (printf "kubeScheduler.httpTimeout (%s) must be at least extender.filterSyncWait (%s) + 5s: a syncing leader holds /filter that long" .Values.kubeScheduler.httpTimeout .Values.extender.filterSyncWait) -}}
{{- end -}}
{{- if lt $http (addf $bind 5000.0) -}}
{{- fail (printf "kubeScheduler.httpTimeout (%s) must be at least extender.bindLockWait (%s) + 5s: /bind waits that long for a node lock, then patches and binds" .Values.kubeScheduler.httpTimeout .Values.extender.bindLockWait) -}}
{{- end -}}
{{- end -}}

{{/* Device config --------------------------------------------------------------------------------------------- */}}

{{/* The device-config.yaml text the chart renders. */}}
{{- define "hami-scheduler.deviceConfigText" -}}
{{- if .Values.deviceConfig.content -}}
{{- .Values.deviceConfig.content -}}
{{- else -}}
{{- $config := dict "nvidia" .Values.deviceConfig.nvidia -}}
{{- range $vendor := list "hygon" "cambricon" "mthreads" "metax" "kunlun" "enflame" -}}
{{- $values := index $.Values.devices $vendor -}}
{{- if $values.enabled -}}
{{- $_ := set $config $vendor (omit $values "enabled") -}}
{{- end -}}
{{- end -}}
{{- /* AWS Neuron, AMD, Vastai, Biren */ -}}
{{- range $vendor := list "awsneuron" "amd" "vastai" "biren" -}}
{{- $values := index $.Values.devices $vendor -}}
{{- if $values.enabled -}}
{{- $_ := set $config $vendor (omit $values "enabled") -}}
{{- end -}}
{{- end -}}
{{- with .Values.devices.ascend -}}
{{- if .enabled -}}
{{- $vnpus := dict "hamiVnpuCore" .hamiVnpuCore -}}
{{- if .configs -}}
{{- $_ := set $vnpus "configs" .configs -}}
{{- end -}}
{{- $_ := set $config "vnpus" $vnpus -}}
{{- end -}}
{{- end -}}
{{- with .Values.devices.iluvatar -}}
{{- if and .enabled .configs -}}
{{- $_ := set $config "iluvatars" .configs -}}
{{- end -}}
{{- end -}}
{{- $config | toYaml -}}
{{- end -}}
{{- end -}}

{{/* HAMi's chart chips (vendors §2.1.1): the Ascend resources managed when devices.ascend.configs is empty. */}}
{{- define "hami-scheduler.ascendChips" -}}
Ascend910A Ascend910B2 Ascend910B3 Ascend910B4-1 Ascend910B4 Ascend310P Ascend910C
{{- end -}}

{{/* kubeScheduler.managedResources plus those of the enabled vendors, as HAMi's chart manages them
     (Ascend: count, memory and core per chip; Hygon, AWS Neuron, AMD, Vastai, Biren, Metax, Enflame, Kunlunxin:
     all their names; Cambricon and Moore Threads: the count; Iluvatar: count, memory and core per chip). */}}
{{- define "hami-scheduler.managedResources" -}}
{{- $names := .Values.kubeScheduler.managedResources -}}
{{- with .Values.devices -}}
{{- if .hygon.enabled -}}
{{- $names = concat $names (list .hygon.resourceCountName .hygon.resourceMemoryName .hygon.resourceCoreName) -}}
{{- end -}}
{{- if .cambricon.enabled -}}
{{- $names = append $names .cambricon.resourceCountName -}}
{{- end -}}
{{- if .mthreads.enabled -}}
{{- $names = append $names .mthreads.resourceCountName -}}
{{- end -}}
{{- /* AWS Neuron, AMD, Vastai, Biren: every name of the section (HAMi's customresources lists) */ -}}
{{- range $vendor := list "awsneuron" "amd" "vastai" "biren" -}}
{{- $values := index $.Values.devices $vendor -}}
{{- if $values.enabled -}}
{{- $names = concat $names (list $values.resourceCountName (default "" $values.resourceMemoryName) (default "" $values.resourceCoreName)) -}}
{{- end -}}
{{- end -}}
{{- /* Metax, Kunlunxin, Enflame, Iluvatar (HAMi's lists, V§1.3) */ -}}
{{- if .metax.enabled -}}
{{- $names = concat $names (list .metax.resourceCountName .metax.resourceVCountName .metax.resourceVCoreName .metax.resourceVMemoryName) -}}
{{- end -}}
{{- if .enflame.enabled -}}
{{- $names = concat $names (list .enflame.resourceNameDRSGCU .enflame.resourceNameGCUMemory .enflame.resourceNameGCUCore .enflame.resourceNameGCU) -}}
{{- end -}}
{{- if .kunlun.enabled -}}
{{- $names = concat $names (list .kunlun.resourceCountName .kunlun.resourceVCountName .kunlun.resourceVMemoryName) -}}
{{- end -}}
{{- if .iluvatar.enabled -}}
{{- if .iluvatar.configs -}}
{{- range $chip := .iluvatar.configs -}}
{{- $word := $chip.commonWord -}}
{{- $names = concat $names (list (default (printf "iluvatar.ai/%s-vgpu" $word) $chip.resourceCountName) (default (printf "iluvatar.ai/%s.vMem" $word) $chip.resourceMemoryName) (default (printf "iluvatar.ai/%s.vCore" $word) $chip.resourceCoreName)) -}}
{{- end -}}
{{- else -}}
{{- range $word := list "MR-V100" "MR-V50" "BI-V150" "BI-V100" -}}
{{- $names = concat $names (list (printf "iluvatar.ai/%s-vgpu" $word) (printf "iluvatar.ai/%s.vMem" $word) (printf "iluvatar.ai/%s.vCore" $word)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if .ascend.enabled -}}
{{- if .ascend.configs -}}
{{- range $chip := .ascend.configs -}}
{{- $word := $chip.commonWord -}}
{{- $names = concat $names (list (default (printf "huawei.com/%s" $word) $chip.resourceName) (default (printf "huawei.com/%s-memory" $word) $chip.resourceMemoryName) (default (printf "huawei.com/%s-core" $word) $chip.resourceCoreName)) -}}
{{- end -}}
{{- else -}}
{{- range $word := splitList " " (include "hami-scheduler.ascendChips" $) -}}
{{- $names = concat $names (list (printf "huawei.com/%s" $word) (printf "huawei.com/%s-memory" $word) (printf "huawei.com/%s-core" $word)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml (uniq (compact $names)) -}}
{{- end -}}

{{/* Fails when an nvidia resource name of the device config is missing from kubeScheduler.managedResources:
     kube-scheduler would then never send such pods to the extender (and would itself reject them). */}}
{{- define "hami-scheduler.checkManagedResources" -}}
{{- if not .Values.deviceConfig.existingConfigMap -}}
{{- $config := include "hami-scheduler.deviceConfigText" . | fromYaml -}}
{{- if hasKey $config "Error" -}}
{{- fail (printf "deviceConfig.content is not valid YAML: %s" (index $config "Error")) -}}
{{- end -}}
{{- $nvidia := default dict (index $config "nvidia") -}}
{{- range $key := list "resourceCountName" "resourceMemoryName" "resourceMemoryPercentageName" "resourceCoreName" "resourcePriorityName" -}}
{{- $resource := index $nvidia $key -}}
{{- if and $resource (not (has $resource $.Values.kubeScheduler.managedResources)) -}}
{{- fail (printf "kubeScheduler.managedResources must include %s (deviceConfig nvidia.%s)" $resource $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Webhook ------------------------------------------------------------------------------------------------------ */}}

{{/* Comma-separated usernames allowed to change scheduler-owned annotations on UPDATE. */}}
{{- define "hami-scheduler.trustedUsers" -}}
{{- $users := list (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "hami-scheduler.serviceAccountName" .)) -}}
{{- with .Values.webhook.devicePluginServiceAccount -}}
{{- if .name -}}
{{- $users = append $users (printf "system:serviceaccount:%s:%s" (default $.Release.Namespace .namespace) .name) -}}
{{- end -}}
{{- end -}}
{{- $users = concat $users .Values.webhook.trustedUsers | uniq -}}
{{- join "," $users -}}
{{- end -}}

{{/* TLS ------------------------------------------------------------------------------------------------------------ */}}

{{/* Helm-generated CA and serving certificate, computed once per render (memoised in .Values so the Secret,
     the webhook caBundle and the pod checksum agree) and kept across upgrades: the existing Secret is reused
     unless its SANs changed or it expires within tls.generated.renewBeforeDays. Returns YAML. */}}
{{- define "hami-scheduler.generatedTLS" -}}
{{- if not (hasKey .Values "__generatedTLS") -}}
{{- $dnsNames := include "hami-scheduler.tlsDnsNames" . | fromYamlArray -}}
{{- $ips := include "hami-scheduler.tlsIPs" . | fromYamlArray -}}
{{- $sans := join "," (concat $dnsNames (without $ips "127.0.0.1")) -}}
{{- $now := now | unixEpoch | int64 -}}
{{- $renewBefore := mul (int .Values.tls.generated.renewBeforeDays) 86400 -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "hami-scheduler.tlsSecretName" .) -}}
{{- $material := dict -}}
{{- if and $existing $existing.data $existing.metadata.annotations -}}
{{- $annotations := $existing.metadata.annotations -}}
{{- $notAfter := index $annotations "hami.io/tls-not-after-unix" | default "0" | int64 -}}
{{- $data := $existing.data -}}
{{- if and (index $data "tls.crt") (index $data "tls.key") (index $data "ca.crt") (eq (index $annotations "hami.io/tls-sans" | default "") $sans) (gt $notAfter (add $now $renewBefore)) -}}
{{- $material = dict "crt" (index $data "tls.crt") "key" (index $data "tls.key") "ca" (index $data "ca.crt") "notAfter" (toString $notAfter) -}}
{{- end -}}
{{- end -}}
{{- if not $material -}}
{{- $days := int .Values.tls.generated.validityDays -}}
{{- $ca := genCA (printf "%s-ca" (include "hami-scheduler.fullname" .)) $days -}}
{{- $cert := genSignedCert (include "hami-scheduler.serviceHost" .) $ips $dnsNames $days $ca -}}
{{- $material = dict "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) "ca" ($ca.Cert | b64enc) "notAfter" (toString (add $now (mul $days 86400))) -}}
{{- end -}}
{{- $_ := set $material "sans" $sans -}}
{{- $_ := set .Values "__generatedTLS" $material -}}
{{- end -}}
{{- toYaml (index .Values "__generatedTLS") -}}
{{- end -}}

{{/* kube-scheduler's client identity towards the extender (issue 11): a CA of its own and one client
     certificate, generated by Helm whatever the serving certificate's source (nothing else trusts or is
     signed by that CA), kept across upgrades like the serving certificate. Returns YAML. */}}
{{- define "hami-scheduler.clientTLS" -}}
{{- if not (hasKey .Values "__clientTLS") -}}
{{- $now := now | unixEpoch | int64 -}}
{{- $renewBefore := mul (int .Values.tls.generated.renewBeforeDays) 86400 -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "hami-scheduler.clientSecretName" .) -}}
{{- $material := dict -}}
{{- if and $existing $existing.data $existing.metadata.annotations -}}
{{- $notAfter := index $existing.metadata.annotations "hami.io/tls-not-after-unix" | default "0" | int64 -}}
{{- $data := $existing.data -}}
{{- if and (index $data "tls.crt") (index $data "tls.key") (index $data "ca.crt") (gt $notAfter (add $now $renewBefore)) -}}
{{- $material = dict "crt" (index $data "tls.crt") "key" (index $data "tls.key") "ca" (index $data "ca.crt") "notAfter" (toString $notAfter) -}}
{{- end -}}
{{- end -}}
{{- if not $material -}}
{{- $days := int .Values.tls.generated.validityDays -}}
{{- $ca := genCA (printf "%s-kube-scheduler-ca" (include "hami-scheduler.fullname" .)) $days -}}
{{- $cert := genSignedCert "hami-kube-scheduler" nil nil $days $ca -}}
{{- $material = dict "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) "ca" ($ca.Cert | b64enc) "notAfter" (toString (add $now (mul $days 86400))) -}}
{{- end -}}
{{- $_ := set .Values "__clientTLS" $material -}}
{{- end -}}
{{- toYaml (index .Values "__clientTLS") -}}
{{- end -}}

{{- define "hami-scheduler.clientSecretName" -}}
{{- printf "%s-kube-scheduler-client" (include "hami-scheduler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Which TLS source is in use: existing, certManager or generated. */}}
{{- define "hami-scheduler.tlsMode" -}}
{{- if .Values.tls.existingSecret -}}existing
{{- else if .Values.tls.certManager.enabled -}}certManager
{{- else -}}generated
{{- end -}}
{{- end -}}

{{/* The webhook caBundle (base64 PEM) when it is not injected by cert-manager. */}}
{{- define "hami-scheduler.caBundle" -}}
{{- $mode := include "hami-scheduler.tlsMode" . -}}
{{- if eq $mode "generated" -}}
{{- (include "hami-scheduler.generatedTLS" . | fromYaml).ca -}}
{{- else if eq $mode "existing" -}}
{{- if .Values.tls.caBundle -}}
{{- .Values.tls.caBundle -}}
{{- else -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace .Values.tls.existingSecret -}}
{{- $ca := "" -}}
{{- if and $secret $secret.data -}}{{- $ca = index $secret.data "ca.crt" | default "" -}}{{- end -}}
{{- required (printf "tls.caBundle is required: Secret %s/%s has no ca.crt here (helm template cannot look it up)" .Release.Namespace .Values.tls.existingSecret) $ca -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Environment ------------------------------------------------------------------------------------------------ */}}

{{/* Settings both processes read (config/settings.py), identical in both containers. */}}
{{- define "hami-scheduler.commonEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: HAMI_SCHEDULER_NAME
  value: {{ .Values.schedulerName | quote }}
- name: HAMI_ADOPT_SCHEDULER_NAMES
  value: {{ join "," .Values.adoptSchedulerNames | quote }}
- name: HAMI_NODE_SCHEDULER_POLICY
  value: {{ .Values.defaultSchedulerPolicy.nodeSchedulerPolicy | quote }}
- name: HAMI_GPU_SCHEDULER_POLICY
  value: {{ .Values.defaultSchedulerPolicy.gpuSchedulerPolicy | quote }}
- name: HAMI_FORCE_OVERWRITE_DEFAULT_SCHEDULER
  value: {{ .Values.forceOverwriteDefaultScheduler | toString | quote }}
- name: HAMI_NODELOCK_EXPIRE
  value: {{ .Values.nodeLockExpire | quote }}
- name: HAMI_GANG_TTL
  value: {{ .Values.gangs.ttl | quote }}
- name: HAMI_NODE_LABEL_SELECTOR
  value: {{ include "hami-scheduler.nodeLabelSelector" . | quote }}
- name: HAMI_DEVICE_CONFIG_FILE
  value: /etc/hami/device-config.yaml
- name: HAMI_STATE_DIR
  value: /var/run/hami
- name: HAMI_LEADER_ELECT
  value: {{ include "hami-scheduler.leaderElect" . | eq "true" | toString | quote }}
- name: HAMI_LEADER_ELECT_MODE
  value: {{ .Values.leaderElection.mode | quote }}
- name: HAMI_LEADER_ELECT_RESOURCE_NAME
  value: {{ include "hami-scheduler.workerLeaseName" . | quote }}
- name: HAMI_LEADER_ELECT_RESOURCE_NAMESPACE
  value: {{ .Release.Namespace | quote }}
- name: HAMI_LEASE_DURATION
  value: {{ .Values.leaderElection.leaseDuration | quote }}
- name: HAMI_RENEW_DEADLINE
  value: {{ .Values.leaderElection.renewDeadline | quote }}
- name: HAMI_RETRY_PERIOD
  value: {{ .Values.leaderElection.retryPeriod | quote }}
- name: HAMI_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: HAMI_EVENTS
  value: {{ .Values.events | toString | quote }}
- name: HAMI_STATE_METRICS_INTERVAL
  value: {{ .Values.stateMetricsInterval | quote }}
- name: HAMI_LOCK_SWEEP_INTERVAL
  value: {{ .Values.lockSweepInterval | quote }}
- name: HAMI_ENABLE_ASCEND
  value: {{ .Values.devices.ascend.enabled | toString | quote }}
- name: HAMI_ENABLE_ILUVATAR
  value: {{ .Values.devices.iluvatar.enabled | toString | quote }}
{{- end -}}

{{- define "hami-scheduler.nodeLabelSelector" -}}
{{- $terms := list -}}
{{- range $key, $value := .Values.nodeLabelSelector -}}
{{- $terms = append $terms (printf "%s=%s" $key (toString $value)) -}}
{{- end -}}
{{- join "," $terms -}}
{{- end -}}

{{/* Pod-level checksums: a change of configuration or CA restarts the pods (kube-scheduler reads its config
     and the CA file only at start). */}}
{{- define "hami-scheduler.checksums" -}}
checksum/scheduler-config: {{ include (print $.Template.BasePath "/configmap-scheduler.yaml") . | sha256sum }}
checksum/device-config: {{ include (print $.Template.BasePath "/configmap-device.yaml") . | sha256sum }}
{{- if eq (include "hami-scheduler.tlsMode" .) "generated" }}
checksum/ca: {{ (include "hami-scheduler.generatedTLS" . | fromYaml).ca | sha256sum }}
{{- end }}
checksum/kube-scheduler-client: {{ (include "hami-scheduler.clientTLS" . | fromYaml).crt | sha256sum }}
{{- end -}}

{{/* Admission scope ------------------------------------------------------------------------------------------ */}}

{{/* What the webhook's matchConditions select, as JSON (issue 28): generated/admission-scope.json (written by
     `python -m app.cli keys --chart` from the vendors' declarations; tests/chart keep it equal) for the families
     the service enables with this chart's device config, plus the names that config and managedResources set.
     keys/prefixes/affixes: scheduler-owned pod keys; resources/resourceAffixes: every resource name an enabled
     vendor reads; everyPod: a vendor's mutation touches pods that ask for none of them (overwriteEnv,
     gpuCorePolicy), so every pod CREATE must be sent. With deviceConfig.existingConfigMap the config is not
     known at render time: every family without an --enable flag counts as enabled, and webhook.everyPod says
     whether that ConfigMap sets overwriteEnv or gpuCorePolicy. */}}
{{- define "hami-scheduler.admissionScope" -}}
{{- $scope := .Files.Get "generated/admission-scope.json" | fromJson -}}
{{- if not $scope.families -}}
{{- fail "generated/admission-scope.json is missing from the chart: run `python -m app.cli keys --chart`" -}}
{{- end -}}
{{- $known := not .Values.deviceConfig.existingConfigMap -}}
{{- $config := dict -}}
{{- if $known -}}
{{- $config = include "hami-scheduler.deviceConfigText" . | fromYaml -}}
{{- end -}}
{{- $flags := dict "ascend" .Values.devices.ascend.enabled "iluvatar" .Values.devices.iluvatar.enabled -}}
{{- $resources := dict -}}
{{- range .Values.kubeScheduler.managedResources -}}
{{- $_ := set $resources . true -}}
{{- end -}}
{{- $affixes := list -}}
{{- $everyPod := .Values.webhook.everyPod -}}
{{- range $family := $scope.families -}}
{{- $section := index $config $family.section -}}
{{- $enabled := false -}}
{{- if $family.always -}}
{{- $enabled = true -}}
{{- else if $family.flag -}}
{{- $enabled = index $flags $family.flag -}}
{{- else if not $known -}}
{{- $enabled = true -}}
{{- else if kindIs "map" $section -}}
{{- range $key := $family.countKeys -}}
{{- if index $section $key -}}
{{- $enabled = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $enabled -}}
{{- range $family.resources -}}
{{- $_ := set $resources . true -}}
{{- end -}}
{{- $affixes = concat $affixes $family.resourceAffixes -}}
{{- /* the section and its chips (a list of its own, or one the section holds: vnpus.configs) */ -}}
{{- $entries := list -}}
{{- if kindIs "map" $section -}}
{{- $entries = append $entries $section -}}
{{- range $value := values $section -}}
{{- if kindIs "slice" $value -}}
{{- $entries = concat $entries $value -}}
{{- end -}}
{{- end -}}
{{- else if kindIs "slice" $section -}}
{{- $entries = $section -}}
{{- end -}}
{{- range $entry := $entries -}}
{{- if kindIs "map" $entry -}}
{{- range $key, $value := $entry -}}
{{- if and (hasPrefix "resource" $key) (kindIs "string" $value) $value -}}
{{- $_ := set $resources $value true -}}
{{- end -}}
{{- if and (has $key $family.everyPod) $value (not (has (toString $value) (list "false" "default"))) -}}
{{- $everyPod = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $keys := dict -}}
{{- range $scope.ownedKeys -}}
{{- $_ := set $keys . true -}}
{{- end -}}
{{- $labels := dict -}}
{{- range $scope.optOutLabels -}}
{{- $_ := set $labels . true -}}
{{- end -}}
{{- dict "keys" $keys "prefixes" $scope.ownedPrefixes "affixes" $scope.ownedAffixes "resources" $resources "resourceAffixes" (uniq $affixes) "everyPod" $everyPod "optOutLabels" $labels "unboundFlags" $scope.unboundFlags | toJson -}}
{{- end -}}

{{/* A CEL test of the string variable $.var against a name set: `$.var in {map}` or one of the prefixes or
     (prefix, suffix) pairs. */}}
{{- define "hami-scheduler.celNameTest" -}}
{{- $v := .var -}}
{{- $terms := list (printf "%s in %s" $v (toJson .names)) -}}
{{- range .prefixes -}}
{{- $terms = append $terms (printf "%s.startsWith(%s)" $v (toJson .)) -}}
{{- end -}}
{{- range .affixes -}}
{{- if index . 1 -}}
{{- $terms = append $terms (printf "(%s.startsWith(%s) && %s.endsWith(%s))" $v (toJson (index . 0)) $v (toJson (index . 1))) -}}
{{- else -}}
{{- $terms = append $terms (printf "%s.startsWith(%s)" $v (toJson (index . 0))) -}}
{{- end -}}
{{- end -}}
{{- printf "(%s)" (join " || " $terms) -}}
{{- end -}}
