"""HAMi's chart values -> ours: the one table `migrate-values` applies and docs/install.md shows.

Why it exists: a migration from HAMi's chart starts from the values the user installed it with. Every row
names a value of HAMi's chart (`charts/hami/values.yaml` at the reference commit 4707fb02, chart 2.10.0;
the rows were checked against the reference documents and the stored versions of that file, see
docs/install.md) and says what it becomes here, or why nothing does. docs/install.md's table is rendered
from `ROWS` (`python -m app.cli migrate-values --table`), and a test keeps the two equal. The scheduler part
is here; the devices part is app/cli/hamidevicerows.py.

A row's `to` turns the value into our values (dotted path -> value) and may raise `Unconvertible`; rows
without `to` have no equivalent. When the value is HAMi's own default and the row says `keep`, our default
stays and the reason is reported: our chart differs there on purpose (e.g. the webhook's failure policy).
"""

from __future__ import annotations

from typing import Any

from app.cli.hamidevicerows import DEVICE_ROWS
from app.cli.valueconv import (
    OTHER,
    PLUGIN,
    Merged,
    Row,
    Unconvertible,
    boolean,
    choice,
    gpu_policy,
    integer,
    kube_scheduler_args,
    kube_scheduler_image,
    log_level,
    optional_list,
    optional_map,
    pull_secrets,
    reinvocation,
    same,
)
from app.core.adoption import name_problem


def scheduler_name(value: Any, _merged: Merged) -> dict[str, Any]:
    """Keep HAMi's name, and adopt it (counted, never written) for the pods HAMi placed under it."""
    if not isinstance(value, str) or not value or name_problem(value):
        raise Unconvertible(f"expected a scheduler name, got {value!r}")
    return {"schedulerName": value, "adoptSchedulerNames": [value]}


_SCHEDULER_ROWS: tuple[Row, ...] = (
    # --- scheduler part (the devices part: app/cli/hamidevicerows.py) ------------------------------------
    Row(
        "schedulerName",
        "`schedulerName`, `adoptSchedulerNames`",
        "keep HAMi's name: pods and workloads that name it go on being scheduled, and the pods HAMi placed "
        "under it are adopted (counted, never written)",
        to=scheduler_name,
    ),
    Row(
        "scheduler.leaderElect",
        "`leaderElection.enabled`",
        "`mode: follow` is HAMi's behaviour",
        to=boolean("leaderElection.enabled"),
    ),
    Row(
        "scheduler.replicas",
        "`replicas`",
        "leader election is forced on with more than one",
        to=integer("replicas", 1),
    ),
    Row(
        "scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy",
        "`defaultSchedulerPolicy.nodeSchedulerPolicy`",
        "",
        to=choice("defaultSchedulerPolicy.nodeSchedulerPolicy", "binpack", "spread"),
    ),
    Row(
        "scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy",
        "`defaultSchedulerPolicy.gpuSchedulerPolicy`",
        "",
        to=gpu_policy,
    ),
    Row(
        "scheduler.forceOverwriteDefaultScheduler",
        "`forceOverwriteDefaultScheduler`",
        "",
        to=boolean("forceOverwriteDefaultScheduler"),
    ),
    Row(
        "scheduler.nodeLockExpire",
        "`nodeLockExpire`",
        "honoured here; in HAMi the `--node-lock-timeout` default (5m) overrides it",
        to=same("nodeLockExpire"),
    ),
    Row(
        "scheduler.nodeLabelSelector",
        "`nodeLabelSelector`",
        "the same map",
        to=optional_map("nodeLabelSelector"),
    ),
    Row(
        "scheduler.metricsBindAddress",
        "—",
        "HAMi's gauges are not on the worker's port: the extender's `/metrics` (its HTTPS port) serves "
        "them, and the worker's `:9395/metrics/hami`; `worker.metricsPort` is the worker's own metrics; "
        "scrape with `serviceMonitor.*`",
    ),
    Row("scheduler.livenessProbe", "—", "probes are always on; readiness is leader-only"),
    Row("scheduler.nodeName", "—", "use `nodeSelector`"),
    Row("scheduler.podAnnotations", "`podAnnotations`", "", to=optional_map("podAnnotations")),
    Row("scheduler.tolerations", "`tolerations`", "", to=optional_list("tolerations")),
    Row("scheduler.kubeScheduler.enabled", "—", "the kube-scheduler sidecar is always there"),
    Row(
        "scheduler.kubeScheduler.image.registry",
        "`kubeScheduler.image.repository`",
        "registry and repository in one value",
        to=kube_scheduler_image,
        hami_default="registry.cn-hangzhou.aliyuncs.com",
        keep="ours pulls `registry.k8s.io/kube-scheduler`, HAMi's default is a mirror of it",
    ),
    Row(
        "scheduler.kubeScheduler.image.repository",
        "`kubeScheduler.image.repository`",
        "registry and repository in one value",
        to=kube_scheduler_image,
        hami_default="google_containers/kube-scheduler",
        keep="ours pulls `registry.k8s.io/kube-scheduler`, HAMi's default is a mirror of it",
    ),
    Row(
        "scheduler.kubeScheduler.image.tag",
        "`kubeScheduler.image.tag`",
        "empty = the cluster's version, as in HAMi",
        to=same("kubeScheduler.image.tag"),
    ),
    Row(
        "scheduler.kubeScheduler.image.pullPolicy",
        "`kubeScheduler.image.pullPolicy`",
        "",
        to=choice("kubeScheduler.image.pullPolicy", "Always", "IfNotPresent", "Never"),
    ),
    Row(
        "scheduler.kubeScheduler.image.pullSecrets",
        "`imagePullSecrets`",
        "for the whole pod",
        to=pull_secrets,
    ),
    Row(
        "scheduler.kubeScheduler.resources",
        "`kubeScheduler.resources`",
        "",
        to=same("kubeScheduler.resources", dict, "a map"),
        hami_default={},
        keep="HAMi sets no requests or limits; ours has both",
    ),
    Row(
        "scheduler.kubeScheduler.extraNewArgs",
        "`kubeScheduler.verbosity`, `kubeScheduler.extraArgs`",
        "`-v=N` becomes the verbosity, `--config` is the chart's own, the rest are extra flags",
        to=kube_scheduler_args,
        hami_default=["--config=/config/config.yaml", "-v=4"],
        keep="our verbosity is 2 (HAMi's 4 logs every scheduling attempt)",
    ),
    Row(
        "scheduler.kubeScheduler.extraArgs",
        "—",
        "the legacy Policy file of Kubernetes < 1.22; only `KubeSchedulerConfiguration` v1 here",
    ),
    Row(
        "scheduler.extender.image.*",
        "`image.*`",
        "our image, not `projecthami/hami`: set `image.repository`/`image.tag` yourself",
    ),
    Row("scheduler.extender.image.pullSecrets", "`imagePullSecrets`", "for the whole pod", to=pull_secrets),
    Row(
        "scheduler.extender.resources",
        "`extender.resources`",
        "the registration worker has its own, `worker.resources`",
        to=same("extender.resources", dict, "a map"),
        hami_default={},
        keep="HAMi sets no requests or limits; ours has both",
    ),
    Row(
        "scheduler.extender.extraArgs",
        "`logLevel`",
        "`--debug` or `-v` of 4 or more is `DEBUG`, else `INFO`",
        to=log_level,
        hami_default=["--debug", "-v=4"],
        keep="ours logs at INFO (HAMi's default logs at debug level)",
    ),
    Row("scheduler.admissionWebhook.enabled", "`webhook.enabled`", "", to=boolean("webhook.enabled")),
    Row(
        "scheduler.admissionWebhook.failurePolicy",
        "`webhook.failurePolicy`",
        "",
        to=choice("webhook.failurePolicy", "Fail", "Ignore"),
        hami_default="Ignore",
        keep="ours is `Fail`: failing open sends GPU pods unmutated to default-scheduler (docs/install.md, "
        "failure policy)",
    ),
    Row(
        "scheduler.admissionWebhook.whitelistNamespaces",
        "`webhook.excludeNamespaces`",
        "`kube-system` and the release namespace are always excluded",
        to=optional_list("webhook.excludeNamespaces"),
    ),
    Row(
        "scheduler.admissionWebhook.namespaceSelector.matchLabels",
        "`webhook.namespaceSelector.matchLabels`",
        "",
        to=optional_map("webhook.namespaceSelector.matchLabels"),
    ),
    Row(
        "scheduler.admissionWebhook.namespaceSelector.matchExpressions",
        "`webhook.namespaceSelector.matchExpressions`",
        "",
        to=optional_list("webhook.namespaceSelector.matchExpressions"),
    ),
    Row(
        "scheduler.admissionWebhook.objectSelector.matchLabels",
        "`webhook.objectSelector.matchLabels`",
        "pods labelled `hami.io/webhook=ignore` are excluded only with `webhook.podOptOut: true`",
        to=optional_map("webhook.objectSelector.matchLabels"),
    ),
    Row(
        "scheduler.admissionWebhook.objectSelector.matchExpressions",
        "`webhook.objectSelector.matchExpressions`",
        "",
        to=optional_list("webhook.objectSelector.matchExpressions"),
    ),
    Row("scheduler.admissionWebhook.manageNamespaceSelector", "—", "the chart always renders the selector"),
    Row("scheduler.admissionWebhook.reinvocationPolicy", "—", "always `Never`", to=reinvocation),
    Row("scheduler.admissionWebhook.customURL.*", "—", "the API server calls the webhook Service"),
    Row(
        "scheduler.certManager.enabled",
        "`tls.certManager.enabled`",
        "",
        to=boolean("tls.certManager.enabled"),
    ),
    Row(
        "scheduler.patch.*", "`tls.generated.*`", "no Job and no extra image: Helm generates the certificate"
    ),
    Row(
        "scheduler.service.type",
        "`service.type`",
        "",
        to=choice("service.type", "ClusterIP", "NodePort", "LoadBalancer"),
        hami_default="NodePort",
        keep="ours is `ClusterIP`: nothing outside the cluster needs to reach the scheduler",
    ),
    Row(
        "scheduler.service.annotations",
        "`service.annotations`",
        "",
        to=optional_map("service.annotations"),
    ),
    Row(
        "scheduler.service.*",
        "—",
        "ports are fixed (`service.port` 443); metrics through the ServiceMonitor's headless Service",
    ),
    Row("legacyMetrics", "—", "HAMi's old metric names are not served"),
    Row("global.imagePullSecrets", "`imagePullSecrets`", "", to=pull_secrets),
    Row("global.imageRegistry", "—", "HAMi's images; ours is `image.repository`"),
    Row("global.imageTag", "—", "HAMi's images; ours is `image.tag`"),
    Row("global.labels", "—", "HAMi labels all its objects; here `podLabels` labels the pods"),
    Row(
        "global.annotations", "—", "HAMi annotates all its objects; here `podAnnotations` annotates the pods"
    ),
    Row(
        "global.managedNodeSelectorEnable",
        "—",
        "the `NODE_SELECTOR_*` variables it sets are read by no HAMi code",
    ),
    Row(
        "global.managedNodeSelector.*",
        "—",
        "the `NODE_SELECTOR_*` variables it sets are read by no HAMi code",
    ),
    Row("global.gpuHookPath", "—", PLUGIN, part=OTHER),
    Row("nameOverride", "—", "names HAMi's objects; ours are named after our release"),
    Row("fullnameOverride", "—", "names HAMi's objects; ours are named after our release"),
    Row("namespaceOverride", "—", "our objects live in the release namespace"),
    Row("podSecurityPolicy.enabled", "—", "PodSecurityPolicy is gone since Kubernetes 1.25"),
)
ROWS: tuple[Row, ...] = (*_SCHEDULER_ROWS, *DEVICE_ROWS)
