"""`migrate-values`: our chart's values for the values HAMi's chart was installed with.

    python -m app.cli migrate-values HAMI_VALUES.yaml [--hami-release hami] [--hami-namespace kube-system]
    python -m app.cli migrate-values --table

HAMI_VALUES.yaml is what `helm get values <release> -n <namespace>` prints (the user's values) or a whole
values.yaml. Every value in it is looked up in `app.cli.hamivalues.ROWS` (the most specific row wins); the
output is a values file for `helm install -f`: the scheduler part, then the devices part (`deviceConfig`),
then one comment line per HAMi value that has no equivalent here and per HAMi default we do not carry over,
each with the reason. `kubeScheduler.managedResources` follows the NVIDIA resource names, and
`webhook.devicePluginServiceAccount` names HAMi's device plugin ServiceAccount of that release.
`--table` prints the Markdown table of docs/install.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from app.cli.common import CliError, load_document
from app.cli.hamivalues import ROWS
from app.cli.valueconv import Row, Unconvertible, get_path

NVIDIA_KEYS = (
    "resourceCountName",
    "resourceMemoryName",
    "resourceMemoryPercentageName",
    "resourceCoreName",
    "resourcePriorityName",
)
# Our chart's defaults for what the conversion derives (helm/hami-scheduler/values.yaml).
OUR_NVIDIA_NAMES = {
    "resourceCountName": "nvidia.com/gpu",
    "resourceMemoryName": "nvidia.com/gpumem",
    "resourceMemoryPercentageName": "nvidia.com/gpumem-percentage",
    "resourceCoreName": "nvidia.com/gpucores",
    "resourcePriorityName": "nvidia.com/priority",
}
UNKNOWN = "not a value of HAMi's chart 2.10.0 (reference 4707fb02) that we know of"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("values", nargs="?", help="HAMi's values (helm get values <release> -o yaml)")
    parser.add_argument("--hami-release", default="hami", help="HAMi's Helm release name (default: hami)")
    parser.add_argument(
        "--hami-namespace", default="kube-system", help="HAMi's release namespace (default: kube-system)"
    )
    parser.add_argument("--table", action="store_true", help="print the mapping table (Markdown) instead")


@dataclass
class Outcome:
    values: dict[str, Any] = field(default_factory=dict)  # ours, nested
    unmapped: list[tuple[str, Any, str]] = field(default_factory=list)  # (HAMi path, value, why)
    kept: list[tuple[str, Any, str]] = field(default_factory=list)  # HAMi defaults not carried over
    sources: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)  # our path -> HAMi (path, value)


def row_for(path: str) -> Row | None:
    """The most specific row: an exact one, else the longest prefix."""
    exact = [row for row in ROWS if row.hami == path]
    if exact:
        return exact[0]
    prefixed = [row for row in ROWS if row.hami.endswith("*") and row.matches(path)]
    return max(prefixed, key=lambda row: len(row.hami)) if prefixed else None


def leaves(values: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Every value of the file by dotted path; a path a row names exactly is a value even if it is a map."""
    found: list[tuple[str, Any]] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        exact = any(row.hami == path for row in ROWS)
        if isinstance(value, Mapping) and value and not exact:
            found.extend(leaves(value, f"{path}."))
        else:
            found.append((path, value))
    return found


def _set(values: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path; two lists for one path (image pull secrets from three HAMi values) are joined."""
    *parents, last = path.split(".")
    for part in parents:
        values = values.setdefault(part, {})
    old = values.get(last)
    values[last] = (
        [*old, *(v for v in value if v not in old)]
        if isinstance(old, list) and isinstance(value, list)
        else value
    )


def _drop(values: dict[str, Any], path: str) -> None:
    *parents, last = path.split(".")
    for part in parents:
        values = values.get(part, {})
    values.pop(last, None)


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        old = merged.get(key)
        merged[key] = _merge(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return merged


def hami_defaults() -> dict[str, Any]:
    """HAMi's defaults that rows compare with (the reference's, not the whole chart)."""
    defaults: dict[str, Any] = {}
    for row in ROWS:
        if row.keep:
            _set(defaults, row.hami, row.hami_default)
    return defaults


def _apply(row: Row, path: str, value: Any, merged: Mapping[str, Any], out: Outcome) -> None:
    if row.to is None:
        out.unmapped.append((path, value, row.note or "no equivalent"))
        return
    try:
        result = row.to(value, merged)
        if row.keep and result == row.to(row.hami_default, _merge(merged, hami_defaults())):
            out.kept.append((path, value, row.keep))
            return
    except Unconvertible as exc:
        out.unmapped.append((path, value, str(exc)))
        return
    for ours, converted in result.items():
        _set(out.values, ours, converted)
        out.sources.setdefault(ours, []).append((path, value))


def _fullname(values: Mapping[str, Any], release: str) -> str:
    """HAMi's `hami-vgpu.fullname` helper."""
    override = values.get("fullnameOverride")
    if isinstance(override, str) and override:
        return override[:63].rstrip("-")
    name = values.get("nameOverride") or "hami"
    return (release if str(name) in release else f"{release}-{name}")[:63].rstrip("-")


def _superseded(out: Outcome) -> None:
    """device-config.content replaces the whole nvidia section, in HAMi as here: do not pretend otherwise."""
    if not get_path(out.values, "deviceConfig.content"):
        return
    for ours in list(get_path(out.values, "deviceConfig.nvidia") or {}):
        for path, value in out.sources.get(f"deviceConfig.nvidia.{ours}", []):
            why = "device-config.content replaces the nvidia section (in HAMi too); set it there"
            out.unmapped.append((path, value, why))
    _drop(out.values, "deviceConfig.nvidia")


def _managed_resources(out: Outcome) -> None:
    """kubeScheduler.managedResources must hold the device config's NVIDIA names (the chart checks it)."""
    names = dict(OUR_NVIDIA_NAMES)
    names.update({k: v for k, v in (get_path(out.values, "deviceConfig.nvidia") or {}).items() if k in names})
    content = get_path(out.values, "deviceConfig.content")
    if content:
        try:
            parsed = yaml.safe_load(content)
        except yaml.YAMLError as exc:
            raise CliError(f"device-config.content is not valid YAML: {str(exc).splitlines()[0]}") from None
        nvidia = parsed.get("nvidia") if isinstance(parsed, Mapping) else None
        names = {k: str(v) for k, v in (nvidia or {}).items() if k in NVIDIA_KEYS and v}
    managed = list(dict.fromkeys(names[k] for k in NVIDIA_KEYS if k in names))
    if managed != list(OUR_NVIDIA_NAMES.values()):
        _set(out.values, "kubeScheduler.managedResources", managed)


def convert(user: Mapping[str, Any], release: str = "hami", namespace: str = "kube-system") -> Outcome:
    """Our values for HAMi's values `user` (pure: the CLI reads and prints)."""
    out = Outcome()
    merged = _merge(hami_defaults(), user)
    for path, value in leaves(user):
        row = row_for(path)
        if row is None:
            out.unmapped.append((path, value, UNKNOWN))
        else:
            _apply(row, path, value, merged, out)
    _superseded(out)
    _managed_resources(out)
    override = user.get("namespaceOverride")
    namespace = override if isinstance(override, str) and override else namespace
    plugin = {"name": f"{_fullname(user, release)}-device-plugin"[:63].rstrip("-"), "namespace": namespace}
    _set(out.values, "webhook.devicePluginServiceAccount", plugin)
    return out


def _show(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (a device-config.yaml) as literal blocks."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)


def _dump(values: Mapping[str, Any]) -> str:
    return yaml.dump(values, Dumper=_Dumper, sort_keys=False, default_flow_style=False).rstrip()


def render(out: Outcome, source: str) -> str:
    devices = {k: v for k, v in out.values.items() if k == "deviceConfig"}
    scheduler = {k: v for k, v in out.values.items() if k != "deviceConfig"}
    lines = [
        f"# hami-scheduler-py values converted from HAMi's chart values ({source}) by",
        "# `python -m app.cli migrate-values`; the table and the reasons: docs/install.md, Migrating.",
        "# --- scheduler part",
        _dump(scheduler),
    ]
    if devices:
        lines += ["# --- devices part", _dump(devices)]
    if out.unmapped:
        lines.append("# --- HAMi values without an equivalent here (not converted):")
        lines += [f"# {path}: {_show(value)} -- {why}" for path, value, why in out.unmapped]
    if out.kept:
        lines.append("# --- HAMi defaults not carried over (our default stays):")
        lines += [f"# {path}: {_show(value)} -- {why}" for path, value, why in out.kept]
    return "\n".join(lines)


def markdown_table() -> str:
    lines = ["| HAMi chart value | Here | Part | Notes |", "|---|---|---|---|"]
    for row in ROWS:
        note = row.note
        if row.keep:
            note = (
                f"{note}; HAMi's default `{_show(row.hami_default)}` is not carried over: {row.keep}".lstrip(
                    "; "
                )
            )
        lines.append(f"| `{row.hami}` | {row.ours} | {row.part} | {note} |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> str:
    if args.table:
        return markdown_table()
    if not args.values:
        raise CliError("give HAMi's values file (or --table)")
    user = load_document(args.values)
    if user is None:
        user = {}
    if not isinstance(user, Mapping):
        raise CliError(f"{args.values}: expected a mapping of chart values")
    return render(convert(user, args.hami_release, args.hami_namespace), args.values)
