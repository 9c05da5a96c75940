"""Text output shared by the commands: kubectl-style tables, usage bars and readable quantities.

Tables are left-aligned columns separated by two spaces, headers in capitals, the last column not padded
(as `kubectl get`). Memory is MiB in HAMi's annotations and in JSON output; text shows it as Gi/Mi.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from app.core import units
from app.core.model import ContainerDevice

FULL, EMPTY = "█", "░"
ASCII_FULL, ASCII_EMPTY = "#", "."


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns as wide as their widest cell; trailing spaces removed."""
    grid = [list(headers), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in grid) for i in range(len(headers))]
    lines = []
    for row in grid:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def bar(used: int, total: int, *, width: int = 10, ascii: bool = False) -> str:
    """`██████░░░░`: the used share of `total`, rounded to the nearest cell; full when over."""
    full, empty = (ASCII_FULL, ASCII_EMPTY) if ascii else (FULL, EMPTY)
    if total <= 0:
        return (full if used > 0 else empty) * width
    cells = min(width, round(width * used / total))
    if used > 0 and cells == 0:
        cells = 1  # something is held: never show an empty bar
    return full * cells + empty * (width - cells)


def percent(used: int, total: int) -> str:
    if total <= 0:
        return "-" if used == 0 else "over"
    return f"{100 * used / total:.0f}%"


def mib(value: int) -> str:
    """MiB as people read it: `40Gi`, `23.4Gi`, `512Mi`."""
    if value == 0:
        return "0"
    if abs(value) < 1024:
        return f"{value}Mi"
    if value % 1024 == 0:
        return f"{value // 1024}Gi"
    return f"{value / 1024:.1f}Gi"


def gauge(used: int, total: int, *, memory: bool = False, ascii: bool = False) -> str:
    """`██████░░░░  59%  23.4Gi/40Gi`."""
    amount = f"{mib(used)}/{mib(total)}" if memory else f"{used}/{total}"
    return f"{bar(used, total, ascii=ascii)} {percent(used, total):>4}  {amount}"


def age(seconds: float | None) -> str:
    """`42s`, `3m05s`, `2h01m`, `3d4h`; `?` when unknown."""
    if seconds is None:
        return "?"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


def device_text(device: ContainerDevice, vendor: str, units_of: object = None) -> str:
    """One allocated device, readable: `GPU-1f3a… (NVIDIA) 16Gi 30% cores`; in the vendor's units where
    they are not MiB and percent (`units_of`, the vendor: app.core.units)."""
    if isinstance(units_of, units.Units):
        memory = f" {units_of.memory_text(device.usedmem)}" if device.usedmem else ""
        cores = f" {units_of.cores_text(device.usedcores)}" if device.usedcores else ""
        return f"{device.uuid} ({vendor}){memory}{cores}"
    cores = f" {device.usedcores}% cores" if device.usedcores else ""
    mig = f" MIG {device.mig.profile}@{device.mig.placement.start}" if device.mig else ""
    return f"{device.uuid} ({vendor}) {mib(device.usedmem)}{cores}{mig}"


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
