"""`python -m app.cli keys`: the protected pod keys, generated from the vendors' declarations (issue 19), and
the documentation that carries them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.keytable import every_family, markdown_table, plugins
from app.core import podkeys

REPO = Path(__file__).resolve().parents[2]


def keys(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "app.cli", "keys", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=60, check=False)


def section(doc: str, marker: str) -> str:
    begin, end = f"<!-- {marker}: begin -->", f"<!-- {marker}: end -->"
    assert begin in doc and end in doc, f"lost the generated {marker} markers"
    return doc.split(begin, 1)[1].split(end, 1)[0].strip()


@pytest.mark.parametrize(
    ("doc", "marker", "args"),
    [
        ("security.md", "pod-keys table", ()),
        ("install.md", "pod-keys table", ()),
        ("install.md", "pod-key plugins", ("--plugins",)),
    ],
    ids=["security-table", "install-table", "install-plugins"],
)
def test_the_docs_carry_what_the_command_prints(doc: str, marker: str, args: tuple[str, ...]) -> None:
    printed = keys(*args)
    assert printed.returncode == 0, printed.stderr
    assert section((REPO / "docs" / doc).read_text(), marker) == printed.stdout.strip(), (
        f"docs/{doc} is stale: paste `python -m app.cli keys {' '.join(args)}` between the markers"
    )


def test_every_declared_key_of_every_family_is_in_the_table() -> None:
    families = every_family()
    assert len(families) == 13 and all(vendors for _, vendors in families)
    table = markdown_table(families)
    for _, vendors in families:
        for vendor in vendors:
            for key in vendor.pod_keys:
                shown = key.name.replace(vendor.key, "<type>")
                assert f"`{key.name}`" in table or f"`{shown}`" in table, key.name
    for key in podkeys.CORE_KEYS:
        assert f"`{key.name}`" in table, key.name


def test_every_plugin_that_writes_a_flag_is_named() -> None:
    families = every_family()
    listed = plugins(families)
    for _, vendors in families:
        for vendor in vendors:
            for key in vendor.pod_keys:
                if key.role == "flag":
                    assert key.plugin and f"- {key.plugin}: " in listed and key.name in listed, key


def test_device_config_selects_the_enabled_vendors(tmp_path: Path) -> None:
    config = tmp_path / "device-config.yaml"
    config.write_text("nvidia:\n  resourceCountName: nvidia.com/gpu\n")
    printed = keys("--device-config", str(config))
    assert printed.returncode == 0, printed.stderr
    assert "`hami.io/vgpu-devices-allocated`" in printed.stdout
    assert "AWS_NEURON_IDS" not in printed.stdout


def test_a_missing_device_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    printed = keys("--device-config", str(tmp_path / "absent.yaml"))
    assert printed.returncode == 2 and printed.stdout == ""
    assert len(printed.stderr.strip().splitlines()) == 1 and "hami-scheduler keys: error:" in printed.stderr
