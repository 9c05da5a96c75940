"""Where `inspect` reads the cluster from: a live API server, a `kubectl get -o json` dump, or a replica.

- live (default): KUBECONFIG / ~/.kube/config / the in-cluster service account, read-only (list nodes,
  pods and resource quotas, nothing else; the chart's ClusterRole allows exactly that);
- `--cluster FILE`: what `kubectl get nodes,pods,resourcequotas -A -o json` printed;
- `--url URL`: a replica's `GET /debug/state?all=true` — what that replica's cache and ledger believe
  (assumed and confirmed reservations included), without node locks or cordons (not in its cache).

Live and `--url` also say which of our resource names and nodes DRA serves (app/cli/drasection.py).

The first two decode nodes and pods with the same core functions the scheduler uses
(`app.core.inventory.decode_node`, `app.core.reservations.reservation_from_pod`, for every vendor), so
the view shows the allocations the scheduler counts. Pods of any scheduler that carry an allocation count,
as they do for the ledger's adoption (their schedulerName is shown). A pod whose allocation does not
decode is left out and named in `problems`, and so is a pod carrying keys a device plugin allocates from
(as its vendor declares them, `app.core.podkeys.unaccounted`) without the allocated list that is counted.
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.cli import drasection, gangsection, holdsection
from app.cli.common import CliError, load_cluster
from app.cli.gangsection import GangView
from app.core import podkeys, pods
from app.core.allocation import Holding, NodeFacts
from app.core.capacity import CAPACITY_ANNOTATION
from app.core.codec import CodecError
from app.core.dra import DraFacts
from app.core.inventory import NodeUnregistered, decode_node, node_annotations, node_name
from app.core.model import DeviceInfo, DeviceUse, NodeDevices
from app.core.nodelock import BIND_PHASE
from app.core.reservations import reservation_from_pod
from app.core.vendor import Vendor, node_locks
from app.state.holdjson import HeldView


def lock_keys(vendors: Sequence[Vendor]) -> tuple[str, ...]:
    """Every node lock the vendors take at bind (`app.core.vendor.node_locks`)."""
    return tuple(spec.annotation for spec in node_locks(vendors))


@dataclass
class Loaded:
    nodes: list[NodeFacts] = field(default_factory=list)
    holdings: list[Holding] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    source: str = ""
    dra: DraFacts | None = None  # DRA serving our names or nodes (app/cli/drasection.py); None: not read
    gangs: list[GangView] = field(
        default_factory=list
    )  # PodGroups and their members (app/cli/gangsection.py)
    holds: list[HeldView] | None = None  # a replica's held reservations (holdsection.py); None: not read


def from_objects(
    nodes: Sequence[Mapping[str, Any]], pod_list: Sequence[Mapping[str, Any]], vendors: Sequence[Vendor]
) -> Loaded:
    loaded = Loaded()
    keys = lock_keys(vendors)
    for node in nodes:
        name = node_name(node)
        annotations = node_annotations(node)
        spec = node.get("spec")
        cordoned = bool(spec.get("unschedulable")) if isinstance(spec, Mapping) else False
        locks = {key: annotations[key] for key in keys if key in annotations}
        try:
            devices: NodeDevices | None = decode_node(node, vendors)
            unusable = ""
        except NodeUnregistered as exc:
            if str(exc) == "no device registration" and not locks:
                continue  # not a device node
            devices, unusable = None, str(exc)
        published = annotations.get(CAPACITY_ANNOTATION)
        loaded.nodes.append(NodeFacts(name, devices, unusable, cordoned, locks, published))
    for pod in pod_list:
        stray = podkeys.unaccounted(pods.annotations_of(pod), vendors)
        if stray:
            named = ", ".join(stray)
            loaded.problems.append(f"pod {_who(pod)}: {named} name devices no allocated list counts")
        try:
            reservation = reservation_from_pod(pod, vendors)
        except (CodecError, pods.PodError) as exc:
            loaded.problems.append(f"pod {_who(pod)}: allocation does not decode: {exc}")
            continue
        if reservation is None:
            continue
        spec = pod.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        phase = pods.annotations_of(pod).get(BIND_PHASE, "")
        state = "bound" if spec.get("nodeName") else "reserved"
        if state == "bound" and phase == "allocating":
            state = "allocating"
        loaded.holdings.append(
            Holding(
                reservation.uid,
                reservation.namespace,
                reservation.name,
                reservation.node,
                reservation.uses,
                state,
                str(spec.get("schedulerName") or ""),
            )
        )
    return loaded


def _who(pod: Mapping[str, Any]) -> str:
    try:
        return f"{pods.namespace(pod)}/{pods.name(pod)}"
    except pods.PodError:
        return "<unnamed>"


def from_dump(path: str, vendors: Sequence[Vendor]) -> Loaded:
    cluster = load_cluster(path)
    if not cluster.nodes and not cluster.pods:
        raise CliError(
            f"{path}: no nodes and no pods (expected kubectl get nodes,pods,resourcequotas -A -o json)"
        )
    loaded = from_objects(cluster.nodes, cluster.pods, vendors)
    loaded.gangs = gangsection.from_objects(None, cluster.pods)
    loaded.source = f"dump {path}"
    return loaded


def from_cluster(kubeconfig: str, vendors: Sequence[Vendor]) -> Loaded:
    # Imported here: building the client is only needed for this source, and it is the slowest import.
    from app.k8s.client import connect
    from app.k8s.dra import list_dra
    from app.k8s.errors import ApiError
    from app.k8s.watching import Target, list_objects
    from app.k8s.workload import podgroups_served

    try:
        kube = connect(kubeconfig)
    except Exception as exc:
        raise CliError(f"cannot build a Kubernetes client: {exc}") from None
    dra_problem = gang_problem = ""
    try:
        nodes, _ = list_objects(kube, Target("nodes"), dict)
        pod_list, _ = list_objects(kube, Target("pods"), dict)
        try:
            dra_lists = list_dra(kube)
        except ApiError as exc:
            dra_lists, dra_problem = None, f"DRA objects not readable: {exc.message}"
        try:
            groups = list_objects(kube, Target("podgroups"), dict)[0] if podgroups_served(kube) else []
        except ApiError as exc:
            groups, gang_problem = None, f"PodGroups not readable: {exc.message}"
    except ApiError as exc:
        raise CliError(f"cannot list nodes and pods: {exc.message}") from None
    finally:
        kube.close()
    loaded = from_objects(nodes, pod_list, vendors)
    loaded.gangs = gangsection.from_objects(groups, pod_list)
    if gang_problem:
        loaded.problems.append(gang_problem)
    if dra_problem:
        loaded.problems.append(dra_problem)
    else:
        loaded.dra = drasection.live(dra_lists, vendors, [n.name for n in loaded.nodes])
    loaded.source = f"cluster {kube.api.configuration.host}"
    return loaded


def _context(ca_file: str | None, insecure: bool, cert: str | None, key: str | None) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=ca_file)
        if insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cert:
            context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise CliError(f"TLS settings: {exc}") from None
    return context


def fetch_state(
    url: str,
    *,
    ca_file: str | None = None,
    insecure: bool = False,
    cert: str | None = None,
    key: str | None = None,
    timeout: float = 30.0,
) -> Any:
    """GET <url>/debug/state?all=true as JSON."""
    target = url.rstrip("/") + "/debug/state?all=true"
    context = _context(ca_file, insecure, cert, key) if target.startswith("https:") else None
    try:
        with urllib.request.urlopen(target, timeout=timeout, context=context) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise CliError(f"{target}: HTTP 404: {_not_here(url)}") from None
        raise CliError(f"{target}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise CliError(f"{target}: {_told(exc, cert, target.startswith('https:'))}") from None
    except ValueError:
        raise CliError(f"{target}: the answer is not JSON") from None


# Where /debug/state is (docs/security.md): only on the extender listener, kube-scheduler's, which requires
# kube-scheduler's client certificate; the public listener (webhook, /readyz, /metrics) answers 404.
CLIENT_FLAGS = (
    "--cert <tls.crt> --key <tls.key> of the chart's Secret <release>-kube-scheduler-client "
    "(`python -m sim up` prints the whole command)"
)
CLIENT_REFUSED = ("CERTIFICATE_REQUIRED", "UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN")


def _not_here(url: str) -> str:
    host = urllib.parse.urlsplit(url).hostname or "<host>"
    return (
        "/debug/state is not served on this listener (the public one: webhook, /readyz, /metrics) but on the "
        f"extender listener (the chart's extender.schedulerPort, 8444): --url https://{host}:8444 --ca-file "
        f"<ca.crt of the chart's Secret <release>-tls> {CLIENT_FLAGS}"
    )


def _told(exc: OSError, cert: str | None, https: bool) -> str:
    """One sentence for a failed connection: what the TLS refusal means and the flags that fix it."""
    error = getattr(exc, "reason", None) if isinstance(exc, urllib.error.URLError) else exc
    tls = str(getattr(error, "reason", "") or "") if isinstance(error, ssl.SSLError) else ""
    if any(alert in tls for alert in CLIENT_REFUSED):
        given = f"refused the client certificate {cert}" if cert else "requires a client certificate"
        return (
            f"the replica {given} ({tls}): this is its extender listener, where only kube-scheduler's is "
            f"accepted: {CLIENT_FLAGS}"
        )
    if isinstance(error, http.client.RemoteDisconnected) and not https:
        return f"{error}: the replica serves HTTPS only (--url https://...)"
    if https and isinstance(error, ssl.SSLEOFError | ConnectionResetError):
        # the same refusal when the server's alert is lost: it closed while our request was unread (RST)
        return (
            f"the replica closed the TLS connection ({error}): on its extender listener that is a missing "
            f"or refused client certificate, where only kube-scheduler's is accepted: {CLIENT_FLAGS}"
        )
    if isinstance(error, ssl.SSLCertVerificationError):
        return (
            f"the replica's certificate is not trusted ({error.verify_message}): pass the CA that signed it "
            "with --ca-file (ca.crt of the chart's Secret <release>-tls), or --insecure"
        )
    return str(error or exc)


def _use(raw: Any) -> DeviceUse:
    raw = raw if isinstance(raw, Mapping) else {}
    return DeviceUse(int(raw.get("slots", 0)), int(raw.get("mem", 0)), int(raw.get("cores", 0)))


def from_state(state: Any, url: str) -> Loaded:
    """The replica's view (`app/routes/debug.py`, `all=true`) as nodes and holdings."""
    if not isinstance(state, Mapping) or not isinstance(state.get("nodes"), list):
        raise CliError(f"{url}: not a /debug/state?all=true answer (an older replica?)")
    loaded = Loaded(source=f"replica {url}")
    try:
        for node in state["nodes"]:
            name = str(node["node"])
            devices = tuple(
                DeviceInfo(
                    str(d["uuid"]), int(d["index"]), int(d["count"]), int(d["memory"]), int(d["cores"]),
                    str(d.get("type", "")), int(d.get("numa", 0)), str(d.get("mode", "")), bool(d["health"]),
                    str(d.get("vendor", "")),
                )
                for d in node["devices"]
            )  # fmt: skip
            cordoned = frozenset(str(d["uuid"]) for d in node["devices"] if d.get("cordoned"))
            registered = NodeDevices(name, devices, cordoned) if node.get("registered") else None
            loaded.nodes.append(NodeFacts(name, registered, str(node.get("unusable") or "")))
            for r in node["reservations"]:
                namespace, _, pod = str(r["pod"]).partition("/")
                uses = {str(uuid): _use(use) for uuid, use in (r.get("devices") or {}).items()}
                loaded.holdings.append(Holding(str(r["uid"]), namespace, pod, name, uses, str(r["state"])))
    except (KeyError, TypeError, ValueError) as exc:
        raise CliError(f"{url}: unexpected /debug/state content ({type(exc).__name__}: {exc})") from None
    loaded.dra = drasection.from_state(state)
    loaded.gangs = gangsection.from_state(state) or []
    try:
        loaded.holds = holdsection.from_state(state)
    except (KeyError, TypeError, ValueError) as exc:
        raise CliError(f"{url}: unexpected /debug/state holds ({type(exc).__name__}: {exc})") from None
    return loaded
