"""`keys`: the pod annotations each vendor writes, by role, and who may change them — from the declarations.

    python -m app.cli keys [--device-config FILE] [--plugins | --chart]

Why it exists (issue 19): the webhook's protection, the stale-key cleanup and `inspect` derive from each
vendor's `pod_keys` (app.core.podkeys), so the documentation of the protected keys must too: docs/security.md
and docs/install.md carry this command's output between markers, and a test keeps them equal. Without
`--device-config` it lists every vendor family HAMi has (each with its chart names); with one, the vendors
that file enables. `--plugins` lists the device plugins that write a key after the bind: their
ServiceAccounts belong among the webhook's trusted users (`webhook.trustedUsers`). `--chart` prints the data
the chart's admission matchConditions are built from (app/cli/chartscope.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from app.cli import chartscope
from app.cli.common import TYPE, load_vendors
from app.core.podkeys import CORE_KEYS
from app.core.vendor import ALLOCATION, FLAG, PodKey, Vendor, unchanged
from app.devices import REGISTRY
from app.devices.common.config import DeviceConfigError

EXAMPLE = """examples:
  hami-scheduler keys                                  # every vendor family (the table of docs/security.md)
  hami-scheduler keys --device-config device-config.yaml --plugins"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device-config", help="HAMi's device-config.yaml: only the vendors it enables")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument(
        "--plugins", action="store_true", help="list the device plugins that write keys after the bind"
    )
    shown.add_argument(
        "--chart",
        action="store_true",
        help="the JSON the chart's webhook matchConditions are built from (every family)",
    )


def every_family() -> list[tuple[str, tuple[Vendor, ...]]]:
    """Each of HAMi's families with every backend it can build (its chart names; a section naming each
    count resource enables the backends behind one, such as Metax sGPU or Enflame GCU)."""
    families = []
    for family in REGISTRY:
        vendors: dict[str, Vendor] = {}
        for section in (None, dict.fromkeys(family.count_keys, "x")):
            try:
                built = family.build(section)
            except DeviceConfigError:
                continue
            vendors.update((vendor.key, vendor) for vendor in built if vendor.key not in vendors)
        families.append((family.name, tuple(vendors.values())))
    return families


def after_bind(key: PodKey) -> str:
    """Who may change the key once the pod is bound (trusted users only, whatever the pod's state)."""
    if key.role == ALLOCATION:
        if key.amend is unchanged:
            return "nobody"
        return f"{key.plugin} only, as `{key.amend.__name__}` allows"
    if key.role == FLAG:
        return f"{key.plugin} flips it"
    return "trusted users (informational)"


def _shape(vendor: Vendor, templated: bool) -> tuple[tuple[str, str, str], ...]:
    """The vendor's keys as rows (name, role, who may change it), its type word as `<type>` if `templated`."""
    return tuple(
        (key.name.replace(vendor.key, TYPE) if templated else key.name, key.role, after_bind(key))
        for key in vendor.pod_keys
    )


def _rows(family: str, vendors: Sequence[Vendor]) -> list[str]:
    """One group of rows per set of vendors whose keys differ only by their type word (Ascend's chips)."""
    groups: dict[tuple[tuple[str, str, str], ...], list[Vendor]] = {}
    for vendor in vendors:
        groups.setdefault(_shape(vendor, templated=True), []).append(vendor)
    rows = []
    for shape, members in groups.items():
        which = ", ".join(f"`{v.key}`" for v in members)
        for name, role, after in shape if len(members) > 1 else _shape(members[0], templated=False):
            shown = f"`{name}`" + (f" ({TYPE}: each vendor's)" if TYPE in name else "")
            rows.append(f"| {family} | {which} | {shown} | {role} | {after} |")
    return rows


def markdown_table(families: Sequence[tuple[str, tuple[Vendor, ...]]]) -> str:
    lines = [
        "| Family | Vendor | Pod annotation | Role | Who may change it once the pod is bound |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| every vendor | all | `{k.name}` | {k.role} | {after_bind(k)} |" for k in CORE_KEYS]
    for family, vendors in families:
        lines += _rows(family, vendors)
    return "\n".join(lines)


def plugins(families: Sequence[tuple[str, tuple[Vendor, ...]]]) -> str:
    """The device plugins that write a declared key after the bind, each with the keys it writes."""
    writes: dict[str, set[str]] = {}
    for key in CORE_KEYS:
        if key.plugin:
            writes.setdefault(key.plugin, set()).add(f"`{key.name}`")
    for _, vendors in families:
        for vendor in vendors:
            for key in vendor.pod_keys:
                if key.plugin:
                    writes.setdefault(key.plugin, set()).add(f"`{key.name}`")
    return "\n".join(f"- {plugin}: {', '.join(sorted(keys))}" for plugin, keys in sorted(writes.items()))


def run(args: argparse.Namespace) -> str:
    if args.chart:
        return chartscope.run(args)
    enabled = args.device_config and [("enabled", load_vendors(args.device_config))]
    families = enabled or every_family()
    return plugins(families) if args.plugins else markdown_table(families)
