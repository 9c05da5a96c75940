"""docs/demo.md names every counter the demo's report shows (`scheduler.counters`, `device_plugin.counters`).

The counters are read from the source of the two actors (sim/nodes, sim/kubescheduler): every
`<stats>.count("name")`, `self._count("name")` and `<stats>.counters["name"]`; an f-string name such as
`f"bind_phase_{phase}"` is documented as `bind_phase_<phase>`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ACTORS = ("sim/nodes", "sim/kubescheduler")
DOC = ROOT / "docs" / "demo.md"


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append(f"<{ast.unparse(value.value).split('.')[-1]}>")
        return "".join(parts)
    return None


def counters() -> dict[str, str]:
    """Counter name -> where it is counted."""
    found: dict[str, str] = {}
    for folder in ACTORS:
        for path in sorted((ROOT / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                name = None
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                    if node.func.attr in ("count", "_count") and ast.unparse(node.func.value) in (
                        "self.stats",
                        "self",
                        "stats",
                    ):
                        name = _name(node.args[0])
                elif isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("stats.counters"):
                    name = _name(node.slice)
                if name:
                    found.setdefault(name, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_counter_is_named_in_the_demo_doc() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = {name: where for name, where in counters().items() if f"`{name}`" not in text}
    assert not missing, "docs/demo.md ('The counters') has no row naming: " + ", ".join(
        f"`{name}` (counted at {where})" for name, where in sorted(missing.items())
    )


def test_the_scan_finds_both_actors_counters() -> None:
    found = counters()
    assert {"lock_release_not_owner", "pending_pod_fallback", "bind_phase_<phase>"} <= set(found)
    assert {"bind_errors", "requeued_on_event", "bound", "rejected"} <= set(found)
