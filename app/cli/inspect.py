"""`inspect`: what the scheduler holds — per node and device the memory, cores and slots allocated out of
the total, the pods holding each device, node locks and their age, unhealthy or cordoned devices, and a
cluster summary.

Reads a live cluster (read-only), a `kubectl get nodes,pods,resourcequotas -A -o json` dump or a replica's
/debug/state (app/cli/sources.py), builds the vendor-neutral view (app/core/allocation.py) and the gangs
(app/cli/gangsection.py), and prints it as
a table (`-o text`, default), a wider table with per-pod amounts, states and schedulers and each node's
capacity per vendor (`-o wide`), or JSON (`-o json`; memory in MiB as in HAMi's annotations). The capacity is
what the leader's `hami.io/device-capacity` annotation says when `worker.publishCapacity` is on (the same
function, app/core/capacity.py), shown next to whether the node's annotation agrees. From a replica it
also shows the held reservations (app/cli/holdsection.py).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from app.cli import drasection, gangsection, holdsection, tables
from app.cli.common import CliError, dump_json, load_vendors
from app.cli.sources import Loaded, fetch_state, from_cluster, from_dump, from_state
from app.core import allocation, capacity
from app.core.allocation import ClusterView, DeviceView, NodeView, Share, Totals
from app.core.capacity import VendorCapacity

EXAMPLE = """examples:
  hami-scheduler inspect                                   # the cluster of the current kubeconfig context
  hami-scheduler inspect --node gpu-0,gpu-1 -o wide         # two nodes, with every pod's share and state
  hami-scheduler inspect --namespace team-a --vendor NVIDIA # where one namespace's pods hold NVIDIA devices
  kubectl get nodes,pods,resourcequotas -A -o json > cluster.json
  hami-scheduler inspect --cluster cluster.json -o json     # from a dump, as JSON
  hami-scheduler inspect --url https://127.0.0.1:8443 --ca-file ca.crt   # what one replica believes"""
PODS_SHOWN = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--cluster", metavar="FILE", help="a kubectl get nodes,pods,resourcequotas -A -o json dump"
    )
    source.add_argument("--url", help="a replica's base URL: reads its GET /debug/state?all=true")
    parser.add_argument(
        "--kubeconfig",
        default="",
        help="kubeconfig of the live cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    parser.add_argument(
        "--node", action="append", default=[], help="only these nodes (repeat or comma-separate)"
    )
    parser.add_argument(
        "--vendor", default="", help="only this vendor's devices, e.g. NVIDIA (case-insensitive)"
    )
    parser.add_argument(
        "--namespace", "-n", default="", help="only the pods of this namespace and their devices"
    )
    parser.add_argument(
        "--output", "-o", choices=("text", "wide", "json"), default="text", help="output format"
    )
    parser.add_argument(
        "--ascii", action="store_true", help="draw bars with # and . instead of block characters"
    )
    parser.add_argument("--device-config", help="HAMi device-config.yaml (default: the chart's defaults)")
    parser.add_argument("--ca-file", help="--url: CA bundle that signed the replica's certificate")
    parser.add_argument(
        "--insecure", action="store_true", help="--url: do not verify the replica's certificate"
    )
    parser.add_argument("--cert", help="--url: client certificate (when the replica requires mTLS)")
    parser.add_argument("--key", help="--url: the client certificate's key")


def load(args: argparse.Namespace) -> Loaded:
    if args.url:
        state = fetch_state(
            args.url, ca_file=args.ca_file, insecure=args.insecure, cert=args.cert, key=args.key
        )
        return from_state(state, args.url)
    vendors = load_vendors(args.device_config)
    if args.cluster:
        return from_dump(args.cluster, vendors)
    return from_cluster(args.kubeconfig, vendors)


def evaluate(args: argparse.Namespace, now: datetime | None = None) -> tuple[ClusterView, Loaded]:
    loaded = load(args)
    view = allocation.build(loaded.nodes, loaded.holdings, now or datetime.now(UTC))
    names = [n.strip() for value in args.node for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in {node.name for node in view.nodes}]
    if unknown:
        raise CliError(f"no device node named {', '.join(unknown)} in the {loaded.source}")
    return allocation.only(view, nodes=names, vendor=args.vendor, namespace=args.namespace), loaded


def run(args: argparse.Namespace) -> str:
    view, loaded = evaluate(args)
    if args.output == "json":
        return dump_json(to_json(view, loaded))
    return render(view, loaded, wide=args.output == "wide", ascii=args.ascii)


# -- text ---------------------------------------------------------------------------------------------------


def _pod(share: Share, wide: bool) -> str:
    name = f"{share.namespace}/{share.name}"
    if not wide:
        return name
    use = share.use
    details = [tables.mib(use.mem)]
    if use.cores:
        details.append(f"{use.cores}%")
    details.append(share.state or "?")
    if share.scheduler:
        details.append(share.scheduler)
    return f"{name}({','.join(details)})"


def _pods(device: DeviceView, wide: bool) -> str:
    shown = [_pod(s, wide) for s in device.shares]
    if not wide and len(shown) > PODS_SHOWN:
        shown = [*shown[:PODS_SHOWN], f"+{len(shown) - PODS_SHOWN} more"]
    return " ".join(shown) if shown else "-"


def _device_row(device: DeviceView, first: bool, wide: bool, ascii: bool) -> list[str]:
    i, u = device.info, device.used
    row = [
        device.node if first else "",
        str(i.index) if i.index >= 0 else "-",
        i.id if wide else tables.shorten(i.id, 16),
        i.vendor or "-",
        (i.type or "-") if wide else tables.shorten(i.type or "-", 20),
    ]
    if wide:
        row += [i.mode or "-", str(i.numa)]
    return [
        *row,
        tables.gauge(u.mem, i.devmem, memory=True, ascii=ascii),
        tables.gauge(u.cores, i.devcore, ascii=ascii),
        f"{u.slots}/{i.count}",
        ",".join(device.problems) or "ok",
        _pods(device, wide),
    ]


def _node_rows(view: ClusterView, wide: bool, ascii: bool) -> list[list[str]]:
    columns = 12 if wide else 10
    rows = []
    for node in view.nodes:
        if not node.devices:
            state = "unusable (see NODES)" if node.unusable else "no devices"
            rows.append([node.name, *["-"] * (columns - 3), state, "-"])
            continue
        for position, device in enumerate(node.devices):
            rows.append(_device_row(device, position == 0, wide, ascii))
    return rows


def _capacity(node: NodeView) -> dict[str, VendorCapacity]:
    """The node's capacity per vendor, as the capacity annotation computes it (missing devices left out)."""
    known = [d for d in node.devices if not d.missing]
    uses = {d.info.id: d.used for d in known}
    return capacity.node_capacity(
        (d.info for d in known), uses, frozenset(d.info.id for d in known if d.cordoned)
    )


def _capacity_rows(view: ClusterView) -> list[list[str]]:
    rows = []
    for node in view.nodes:
        for vendor, c in _capacity(node).items():
            rows.append(
                [
                    node.name,
                    vendor or "-",
                    f"{c.devices_free}/{c.devices}",
                    f"{tables.mib(c.memory_free)}/{tables.mib(c.memory)}",
                    f"{c.cores_free}/{c.cores}",
                    capacity.published_state(node.published, vendor, c),
                ]
            )
    return rows


def _attention(view: ClusterView) -> list[list[str]]:
    rows = []
    for node in view.nodes:
        if node.cordoned:
            rows.append([node.name, "cordoned (spec.unschedulable): no new pods are placed here"])
        if node.unusable:
            rows.append([node.name, f"unusable: {node.unusable}"])
    return rows


def _totals_row(label: str, totals: Totals, ascii: bool) -> list[str]:
    return [
        label,
        str(totals.devices),
        tables.gauge(totals.memory_used, totals.memory, memory=True, ascii=ascii),
        tables.gauge(totals.cores_used, totals.cores, ascii=ascii),
        tables.gauge(totals.slots_used, totals.slots, ascii=ascii),
    ]


def render(view: ClusterView, loaded: Loaded, *, wide: bool = False, ascii: bool = False) -> str:
    headers = ["NODE", "IDX", "DEVICE", "VENDOR", "TYPE", "MEMORY", "CORES", "SLOTS", "STATUS", "PODS"]
    if wide:
        headers[5:5] = ["MODE", "NUMA"]
    parts = [tables.table(headers, _node_rows(view, wide, ascii)) if view.nodes else "no device nodes"]
    locks = [
        [node.name, lock.key, lock.holder or "(no owner)", tables.age(lock.age), lock.value]
        for node in view.nodes
        for lock in node.locks
    ]
    if locks:
        parts.append("LOCKS\n" + tables.table(["NODE", "ANNOTATION", "HOLDER", "AGE", "VALUE"], locks))
    if wide and (rows := _capacity_rows(view)):
        headers = ["NODE", "VENDOR", "DEVICES FREE", "MEMORY FREE", "CORES FREE", "ANNOTATION"]
        parts.append("CAPACITY\n" + tables.table(headers, rows))
    attention = _attention(view)
    if attention:
        parts.append("NODES\n" + tables.table(["NODE", "CONDITION"], attention))
    s = view.summary
    summary = [
        f"source   {loaded.source}",
        f"nodes    {s.nodes} ({s.usable_nodes} usable, {s.cordoned_nodes} cordoned, {s.locked_nodes} locked)",
        f"devices  {s.totals.devices} ({s.unhealthy_devices} unhealthy, {s.cordoned_devices} cordoned)",
        f"pods     {s.pods}",
    ]
    vendors = [_totals_row(v, t, ascii) for v, t in s.by_vendor.items()]
    if len(vendors) != 1:
        vendors.append(_totals_row("all", s.totals, ascii))
    parts.append(
        "SUMMARY\n"
        + "\n".join(summary)
        + "\n"
        + tables.table(["VENDOR", "DEVICES", "MEMORY", "CORES", "SLOTS"], vendors)
    )
    if loaded.dra is not None:
        parts.append(drasection.render(loaded.dra))
    if loaded.gangs:
        parts.append(gangsection.render(loaded.gangs))
    if loaded.holds is not None:
        parts.append(holdsection.render(loaded.holds))
    if loaded.problems:
        parts.append("PROBLEMS\n" + "\n".join(loaded.problems))
    return "\n\n".join(parts)


# -- json ---------------------------------------------------------------------------------------------------


def _totals(t: Totals) -> dict[str, Any]:
    return {
        "devices": t.devices,
        "memory_mib": {"used": t.memory_used, "total": t.memory},
        "cores": {"used": t.cores_used, "total": t.cores},
        "slots": {"used": t.slots_used, "total": t.slots},
    }


def _capacity_json(node: NodeView) -> dict[str, Any]:
    """Per vendor the annotation's figures (`devices`, `memoryFree`, ...) and whether the node's agrees."""
    found = {}
    for vendor, c in _capacity(node).items():
        state = capacity.published_state(node.published, vendor, c)
        found[vendor] = {**capacity.figures(c), "annotation": state}
    return found


def to_json(view: ClusterView, loaded: Loaded) -> dict[str, Any]:
    nodes = []
    for node in view.nodes:
        devices = [
            {
                "uuid": d.info.id,
                "index": d.info.index,
                "vendor": d.info.vendor,
                "type": d.info.type,
                "mode": d.info.mode,
                "numa": d.info.numa,
                "health": d.info.health,
                "cordoned": d.cordoned,
                "missing": d.missing,
                "problems": list(d.problems),
                "memory_mib": {"used": d.used.mem, "total": d.info.devmem},
                "cores": {"used": d.used.cores, "total": d.info.devcore},
                "slots": {"used": d.used.slots, "total": d.info.count},
                "pods": [
                    {
                        "uid": s.uid,
                        "namespace": s.namespace,
                        "name": s.name,
                        "state": s.state,
                        "scheduler": s.scheduler,
                        "memory_mib": s.use.mem,
                        "cores": s.use.cores,
                        "slots": s.use.slots,
                    }
                    for s in d.shares
                ],
            }
            for d in node.devices
        ]
        locks = [
            {"annotation": lk.key, "holder": lk.holder, "age_seconds": lk.age, "value": lk.value}
            for lk in node.locks
        ]
        nodes.append(
            {
                "name": node.name,
                "cordoned": node.cordoned,
                "unusable": node.unusable,
                "locks": locks,
                "devices": devices,
                "capacity": _capacity_json(node),
            }
        )
    s = view.summary
    return {
        "source": loaded.source,
        "nodes": nodes,
        "summary": {
            "nodes": s.nodes,
            "usable_nodes": s.usable_nodes,
            "cordoned_nodes": s.cordoned_nodes,
            "locked_nodes": s.locked_nodes,
            "unhealthy_devices": s.unhealthy_devices,
            "cordoned_devices": s.cordoned_devices,
            "pods": s.pods,
            **_totals(s.totals),
            "by_vendor": {vendor: _totals(t) for vendor, t in s.by_vendor.items()},
        },
        "problems": loaded.problems,
        "dra": drasection.to_json(loaded.dra) if loaded.dra is not None else None,
        "gangs": gangsection.to_json(loaded.gangs),
        "holds": holdsection.to_json(loaded.holds) if loaded.holds is not None else None,
    }
