"""Every setting of both processes, read from the environment once at start and validated (HAMI_* vars).

The names mirror HAMi's command-line flags (reference §1.3) so a migration is a rename. Invalid values fail
at start with one readable line (`SettingsError`, config/envvars.py: how one variable is read), before any
library sees them. `load_settings` takes the environment as an argument so tests never touch os.environ.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from app.core.adoption import HAMI_DEFAULT_SCHEDULER, Counted, parse_names
from app.core.decision import Policies
from app.core.policy import BINPACK, GPU_POLICIES, NODE_POLICIES, SPREAD, unknown_gpu_policy
from app.core.vendor import Vendor
from app.devices import FLAGS, DeviceConfigError, build_vendors, disabled_resources
from config.envvars import SettingsError, env_bool, env_choice, env_duration, env_int, env_level


@dataclass(frozen=True, slots=True)
class LeaderSettings:
    enabled: bool = False
    mode: str = "follow"  # follow: observe kube-scheduler's Lease; acquire: hold the Lease ourselves
    resource_name: str = "hami-scheduler"
    resource_namespace: str = "default"
    identity: str = "localhost"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


ROUTES = ("all", "scheduler", "public")
FILTER_WRITES = (
    "auto",
    "deferred",
    "sync",
)  # HAMI_FILTER_WRITE  # HAMI_ROUTES: which routes this Gunicorn serves (issue 11)
# bodies up to HAMI_MAX_BODY_BYTES (/preempt: the pod and victims of up to max(100, 10% of nodes) candidates)
LARGE_BODY_PATHS = ("/filter", "/preempt", "/webhook", "/bench/noop")
SMALL_BODY_BYTES = 64 * 1024  # /bind's args are a few hundred bytes; GET routes take no body at all
GANG_TTL = 15.0  # seconds (docs/gangs.md, "The gang TTL")


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """One Gunicorn server: where it listens, what it serves, how it authenticates its clients.

    `routes`: `scheduler` serves kube-scheduler's verbs (/filter, /bind, /preempt, /debug/*), `public`
    what the API server, the kubelet and Prometheus call (/webhook, /readyz, /metrics), `all` both;
    /healthz is on every server. The chart runs one server of each, with their own worker pools (a
    contended /bind never starves /webhook or /healthz).
    """

    bind: str = "127.0.0.1:8443"
    routes: str = "all"
    workers: int = 2
    threads: int = 4
    cert_file: str = ""
    key_file: str = ""
    client_ca_file: str = ""
    max_body_bytes: int = 4 * 1024 * 1024
    sync_wait_seconds: float = 10.0
    extender_address: str = ""  # host:port of the scheduler verbs' server, which /readyz must reach
    extender_metrics_dir: str = ""  # that server's Prometheus multiprocess dir, included in /metrics

    @property
    def scheduler_verbs(self) -> bool:
        return self.routes in ("all", "scheduler")

    @property
    def public_routes(self) -> bool:
        return self.routes in ("all", "public")

    def body_cap(self, path: str) -> int:
        """The largest request body accepted on `path`: what its callers really send (issue 11)."""
        return self.max_body_bytes if path in LARGE_BODY_PATHS else SMALL_BODY_BYTES


def loopback(bind: str) -> bool:
    """Does a Gunicorn bind address (`host:port`, `[v6]:port`, `unix:path`) accept local clients only?"""
    if bind.startswith("unix:"):
        return True
    host = bind.rpartition(":")[0]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)  # a name (`127.example.com`) is not an address: not loopback
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback  # 127.0.0.0/8 and ::1 only


@dataclass(frozen=True, slots=True)
class Settings:
    scheduler_name: str = "hami-scheduler"
    # Scheduler names whose pods' allocations count besides ours (app/core/adoption.py); never written.
    adopt_scheduler_names: tuple[str, ...] = (HAMI_DEFAULT_SCHEDULER,)
    policies: Policies = field(default_factory=Policies)
    vendors: tuple[Vendor, ...] = field(default_factory=lambda: build_vendors(None, frozenset()))
    device_config: Mapping[str, Any] = field(default_factory=dict)
    # resource name -> why no enabled vendor serves it (a pod asking for it gets that as its Error)
    disabled_resources: Mapping[str, str] = field(default_factory=dict)
    force_overwrite_default_scheduler: bool = True
    nodelock_expire: timedelta = timedelta(minutes=5)
    node_label_selector: str = ""
    state_dir: Path = Path("/var/run/hami")
    leader: LeaderSettings = field(default_factory=LeaderSettings)
    http: HttpSettings = field(default_factory=HttpSettings)
    pod_name: str = ""
    pod_namespace: str = ""
    node_name: str = ""  # NODE_NAME (downward API spec.nodeName): the worker hands over when it is cordoned
    kubeconfig: str = ""
    registration_interval: float = 15.0
    state_metrics_interval: float = 10.0  # seconds between renders of HAMi's gauges (app/state/gauges.py)
    lock_sweep_interval: float = 30.0  # seconds between the leader's sweeps of abandoned node locks
    worker_metrics_bind: str = "0.0.0.0:9395"
    events_enabled: bool = True
    log_level: str = "INFO"
    decision_log: str = "INFO"  # level of the one-line-per-decision log (app/decisions.py); OFF: none
    legacy_metrics: bool = False  # HAMi's --legacy-metrics: also render its old gauge names
    publish_capacity: bool = False  # the leader annotates nodes with hami.io/device-capacity (worker)
    webhook_trusted_users: tuple[str, ...] = ()
    inflight_ttl: float = 60.0  # seconds an unbound pod's decision counts as a bind in flight (worker)
    # HAMI_GANG_TTL: seconds a gang plan holds devices, and a gang member's unbound reservation counts as in
    # flight (docs/gangs.md); below HAMI_INFLIGHT_TTL
    gang_ttl: float = GANG_TTL
    scheduler_role_label: bool = False  # the leader labels our pods hami.io/scheduler-role (worker)
    bind_lock_wait: float = 10.0
    # HAMI_FILTER_WRITE: where /filter writes the allocation (app/filter/write.py). `deferred`: after
    # answering, deciding on the request's pod; `sync`: before answering, on the pod read from the API;
    # `auto`: deferred where the caller is authenticated kube-scheduler (scheduler routes behind a client
    # CA), else sync.
    filter_write: str = "auto"
    bind_write_wait: float = 5.0  # HAMI_BIND_WRITE_WAIT: how long /bind waits for a pending write

    @property
    def deferred_write(self) -> bool:
        if self.filter_write == "auto":
            return bool(self.http.client_ca_file) and self.http.routes == "scheduler"
        return self.filter_write == "deferred"

    bench_noop: bool = False  # HAMI_BENCH_NOOP: register POST /bench/noop (python -m bench only)

    @property
    def counted(self) -> Counted:
        return Counted(self.scheduler_name, self.adopt_scheduler_names)


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _gpu_policy(env: Mapping[str, str]) -> str:
    raw = env.get("HAMI_GPU_SCHEDULER_POLICY") or SPREAD
    unknown = unknown_gpu_policy(raw)
    if unknown is not None:
        known = ", ".join(GPU_POLICIES)
        raise SettingsError(f"HAMI_GPU_SCHEDULER_POLICY={raw!r}: unknown policy {unknown!r} (known: {known})")
    return raw


def _node_policy(env: Mapping[str, str]) -> str:
    raw = env.get("HAMI_NODE_SCHEDULER_POLICY") or BINPACK
    if raw not in NODE_POLICIES:
        raise SettingsError(f"HAMI_NODE_SCHEDULER_POLICY={raw!r}: must be binpack or spread")
    return raw


def load_device_config(path: str) -> Mapping[str, Any]:
    """Read HAMi's device-config.yaml; an unreadable or invalid file is a SettingsError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"HAMI_DEVICE_CONFIG_FILE={path!r}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SettingsError(f"HAMI_DEVICE_CONFIG_FILE={path!r}: invalid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(f"HAMI_DEVICE_CONFIG_FILE={path!r}: expected a mapping of vendor sections")
    return data


def _adopted(env: Mapping[str, str]) -> tuple[str, ...]:
    """HAMI_ADOPT_SCHEDULER_NAMES: unset means HAMi's default name; set but empty means none."""
    raw = env.get("HAMI_ADOPT_SCHEDULER_NAMES")
    if raw is None:
        return (HAMI_DEFAULT_SCHEDULER,)
    try:
        return parse_names(raw)
    except ValueError as exc:
        raise SettingsError(f"HAMI_ADOPT_SCHEDULER_NAMES={raw!r}: {exc}") from None


def _gang_ttl(env: Mapping[str, str], inflight_ttl: float) -> float:
    """HAMI_GANG_TTL (default 15 s, or HAMI_INFLIGHT_TTL when that is shorter): at least 1 s, at most
    HAMI_INFLIGHT_TTL — a gang member's reservation is an in-flight one that is released sooner."""
    if not env.get("HAMI_GANG_TTL"):
        return min(GANG_TTL, inflight_ttl)
    ttl = env_duration(env, "HAMI_GANG_TTL", timedelta(seconds=GANG_TTL)).total_seconds()
    if ttl < 1:
        raise SettingsError("HAMI_GANG_TTL must be at least 1s")
    if ttl > inflight_ttl:
        raise SettingsError(f"HAMI_GANG_TTL must not exceed HAMI_INFLIGHT_TTL ({inflight_ttl:g}s)")
    return ttl


def _leader(env: Mapping[str, str]) -> LeaderSettings:
    mode = env.get("HAMI_LEADER_ELECT_MODE") or "follow"
    if mode not in ("follow", "acquire"):
        raise SettingsError(f"HAMI_LEADER_ELECT_MODE={mode!r}: must be follow or acquire")
    lease = env_duration(env, "HAMI_LEASE_DURATION", timedelta(seconds=15)).total_seconds()
    renew = env_duration(env, "HAMI_RENEW_DEADLINE", timedelta(seconds=10)).total_seconds()
    retry = env_duration(env, "HAMI_RETRY_PERIOD", timedelta(seconds=2)).total_seconds()
    if retry < 1:
        raise SettingsError("HAMI_RETRY_PERIOD must be at least 1s (kubernetes.leaderelection requires it)")
    if not lease > renew:
        raise SettingsError("HAMI_LEASE_DURATION must be greater than HAMI_RENEW_DEADLINE")
    if not renew > 1.2 * retry:
        raise SettingsError("HAMI_RENEW_DEADLINE must be greater than 1.2 x HAMI_RETRY_PERIOD")
    identity = env.get("POD_NAME") or env.get("HOSTNAME") or socket.gethostname()
    # The API server refuses a Lease whose name is no RFC 1123 subdomain (or namespace no label): say so
    # at start instead of failing every election attempt (the emulator used to accept any name).
    name = env.get("HAMI_LEADER_ELECT_RESOURCE_NAME") or "hami-scheduler"
    namespace = env.get("HAMI_LEADER_ELECT_RESOURCE_NAMESPACE") or env.get("POD_NAMESPACE") or "default"
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        raise SettingsError(
            f"HAMI_LEADER_ELECT_RESOURCE_NAME={name!r}: not a valid Lease name (RFC 1123 subdomain)"
        )
    if len(namespace) > 63 or not _DNS_LABEL.fullmatch(namespace):
        raise SettingsError(f"HAMI_LEADER_ELECT_RESOURCE_NAMESPACE={namespace!r}: not a valid namespace name")
    return LeaderSettings(
        enabled=env_bool(env, "HAMI_LEADER_ELECT", False),
        mode=mode,
        resource_name=name,
        resource_namespace=namespace,
        identity=identity,
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
    )


def _http(env: Mapping[str, str]) -> HttpSettings:
    cert, key = env.get("HAMI_TLS_CERT_FILE", ""), env.get("HAMI_TLS_KEY_FILE", "")
    if bool(cert) != bool(key):
        raise SettingsError("HAMI_TLS_CERT_FILE and HAMI_TLS_KEY_FILE must be set together")
    client_ca = env.get("HAMI_TLS_CLIENT_CA_FILE", "")
    if client_ca and not cert:
        raise SettingsError("HAMI_TLS_CLIENT_CA_FILE (mTLS) needs HAMI_TLS_CERT_FILE and HAMI_TLS_KEY_FILE")
    for name, path in (
        ("HAMI_TLS_CERT_FILE", cert),
        ("HAMI_TLS_KEY_FILE", key),
        ("HAMI_TLS_CLIENT_CA_FILE", client_ca),
    ):
        if path and not Path(path).is_file():
            raise SettingsError(f"{name}={path!r}: no such file")
    wait = env_duration(env, "HAMI_FILTER_SYNC_WAIT", timedelta(seconds=10)).total_seconds()
    routes = env.get("HAMI_ROUTES") or "all"
    if routes not in ROUTES:
        raise SettingsError(f"HAMI_ROUTES={routes!r}: must be one of {', '.join(ROUTES)}")
    bind = env.get("HAMI_BIND") or "127.0.0.1:8443"
    if routes != "public" and not loopback(bind) and not client_ca:
        raise SettingsError(
            f"HAMI_BIND={bind!r} would serve /filter and /bind to anyone who reaches it: bind them to "
            "127.0.0.1, require kube-scheduler's client certificate (HAMI_TLS_CLIENT_CA_FILE), or serve "
            "only the public routes (HAMI_ROUTES=public)"
        )
    return HttpSettings(
        bind=bind,
        routes=routes,
        workers=env_int(env, "HAMI_WORKERS", 2, 1, 64),
        threads=env_int(env, "HAMI_THREADS", 4, 1, 256),
        cert_file=cert,
        key_file=key,
        client_ca_file=client_ca,
        max_body_bytes=env_int(env, "HAMI_MAX_BODY_BYTES", 4 * 1024 * 1024, SMALL_BODY_BYTES, 2**31),
        sync_wait_seconds=wait,
        extender_address=env.get("HAMI_EXTENDER_ADDRESS", ""),
        extender_metrics_dir=env.get("HAMI_EXTENDER_METRICS_DIR", ""),
    )


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read and validate all settings; raises SettingsError with one readable line."""
    env = os.environ if env is None else env
    device_path = env.get("HAMI_DEVICE_CONFIG_FILE", "")
    device_config = load_device_config(device_path) if device_path else {}
    switches = {"ascend": "HAMI_ENABLE_ASCEND", "iluvatar": "HAMI_ENABLE_ILUVATAR"}  # HAMi --enable-<flag>
    assert set(switches) == FLAGS, "every vendor switch of app.devices has its setting"
    flags = frozenset(flag for flag, name in switches.items() if env_bool(env, name, False))
    try:
        vendors = build_vendors(device_config, flags)
    except DeviceConfigError as exc:
        raise SettingsError(f"HAMI_DEVICE_CONFIG_FILE={device_path!r}: {exc}") from None
    interval = env_duration(env, "HAMI_REGISTRATION_INTERVAL", timedelta(seconds=15)).total_seconds()
    state_metrics = env_duration(env, "HAMI_STATE_METRICS_INTERVAL", timedelta(seconds=10)).total_seconds()
    if state_metrics < 1:
        raise SettingsError("HAMI_STATE_METRICS_INTERVAL must be at least 1s")
    trusted = tuple(u.strip() for u in env.get("HAMI_WEBHOOK_TRUSTED_USERS", "").split(",") if u.strip())
    inflight_ttl = env_duration(env, "HAMI_INFLIGHT_TTL", timedelta(seconds=60)).total_seconds()
    return Settings(
        scheduler_name=env.get("HAMI_SCHEDULER_NAME") or "hami-scheduler",
        adopt_scheduler_names=_adopted(env),
        policies=Policies(gpu=_gpu_policy(env), node=_node_policy(env)),
        vendors=vendors,
        device_config=device_config,
        disabled_resources=disabled_resources(device_config, flags),
        force_overwrite_default_scheduler=env_bool(env, "HAMI_FORCE_OVERWRITE_DEFAULT_SCHEDULER", True),
        nodelock_expire=env_duration(env, "HAMI_NODELOCK_EXPIRE", timedelta(minutes=5)),
        node_label_selector=env.get("HAMI_NODE_LABEL_SELECTOR", ""),
        state_dir=Path(env.get("HAMI_STATE_DIR") or "/var/run/hami"),
        leader=_leader(env),
        http=_http(env),
        pod_name=env.get("POD_NAME", ""),
        pod_namespace=env.get("POD_NAMESPACE", ""),
        node_name=env.get("NODE_NAME", ""),
        kubeconfig=env.get("KUBECONFIG", ""),
        registration_interval=interval,
        state_metrics_interval=state_metrics,
        lock_sweep_interval=env_duration(
            env, "HAMI_LOCK_SWEEP_INTERVAL", timedelta(seconds=30)
        ).total_seconds(),
        worker_metrics_bind=env.get("HAMI_WORKER_METRICS_BIND") or "0.0.0.0:9395",
        events_enabled=env_bool(env, "HAMI_EVENTS", True),
        log_level=env_level(env, "HAMI_LOG_LEVEL", "INFO"),
        decision_log=env_level(env, "HAMI_DECISION_LOG", "INFO", ("OFF",)),
        legacy_metrics=env_bool(env, "HAMI_LEGACY_METRICS", False),
        publish_capacity=env_bool(env, "HAMI_PUBLISH_CAPACITY", False),
        webhook_trusted_users=trusted,
        inflight_ttl=inflight_ttl,
        gang_ttl=_gang_ttl(env, inflight_ttl),
        scheduler_role_label=env_bool(
            env, "HAMI_SCHEDULER_ROLE_LABEL", bool(env.get("POD_NAME") and env.get("POD_NAMESPACE"))
        ),
        bind_lock_wait=env_duration(env, "HAMI_BIND_LOCK_WAIT", timedelta(seconds=10)).total_seconds(),
        filter_write=env_choice(env, "HAMI_FILTER_WRITE", FILTER_WRITES),
        bind_write_wait=env_duration(env, "HAMI_BIND_WRITE_WAIT", timedelta(seconds=5)).total_seconds(),
        bench_noop=env_bool(env, "HAMI_BENCH_NOOP", False),
    )
