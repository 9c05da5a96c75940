"""The README's commands work as written on a fresh clone, in the order written (issue 31).

Every fenced block after a `<!-- readme-walk -->` comment runs, in order, as one `bash -euo pipefail`
script in a fresh clone of this working tree (committed files, uncommitted changes and untracked files
that git does not ignore), with a PATH that holds nothing of this checkout; `<!-- readme-walk except:
make test -->` leaves out the lines that start with that command (`make test` runs all of this anyway;
`make image` needs root and buildah). Each block must exit 0. What the walk may reuse, as a CI machine
does: Go's module and build caches, pip's and npm's download caches, and the real control plane's
binaries through HAMI_KUBE_CACHE (this checkout's, so `make kube` finds them built). The playground
block stops its cluster itself (`make down`); if it fails half-way, the test stops it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from sim.controlplane import binaries
from sim.emulator.testing import REPO_ROOT

README = REPO_ROOT / "README.md"
TAG = re.compile(
    r"^<!-- readme-walk(?: except: (?P<except>[^>]*?))? -->\n+```[a-z]*\n(?P<body>.*?)^```$", re.M | re.S
)
BLOCK_TIMEOUT = 1800.0  # a cold `make kube` alone takes 11 minutes; warm, the whole walk takes about 3


def walked_blocks(text: str) -> list[list[str]]:
    """The command lines of each tagged block, the excepted ones left out (each must be there)."""
    blocks = []
    for found in TAG.finditer(text):
        lines = found.group("body").splitlines()
        skipped = [c.strip() for c in (found.group("except") or "").split(",") if c.strip()]
        for command in skipped:
            assert any(line.startswith(command) for line in lines), f"no `{command}` line to leave out"
        blocks.append([line for line in lines if not any(line.startswith(c) for c in skipped)])
    return blocks


def test_the_readme_has_walked_blocks() -> None:
    blocks = walked_blocks(README.read_text())
    commands = [line.split("#")[0].strip() for block in blocks for line in block]
    assert "make demo" in commands and "make up" in commands and commands[-1] == "make down"
    assert not any(c.startswith(("make test", "make image")) for c in commands)


def fresh_clone(target: Path) -> Path:
    """This working tree as a fresh clone would have it, uncommitted changes and untracked files included."""
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO_ROOT), str(target)], check=True)
    diff = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "diff", "HEAD", "--binary"], capture_output=True, check=True
    ).stdout
    if diff:
        subprocess.run(["git", "-C", str(target), "apply", "--binary", "-"], input=diff, check=True)
    untracked = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "--others", "--exclude-standard", "-z"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in untracked)):
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_bytes((REPO_ROOT / name).read_bytes())
    return target


def clean_environment() -> dict[str, str]:
    """The caller's environment without this checkout on PATH or any virtualenv, make or kubeconfig
    setting; HAMI_KUBE_CACHE pointing at this checkout's built control plane."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS", "VIRTUAL_ENV"))}
    env.pop("KUBECONFIG", None)
    env.pop("PYTHONPATH", None)
    ours = (str(REPO_ROOT), str(REPO_ROOT.resolve()))
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(ours))
    env["HAMI_KUBE_CACHE"] = str(binaries.cache_dir().resolve())
    return env


def stop_playground(clone: Path) -> None:
    """What `make down` does, for a walk that failed before it got there."""
    pid_file = clone / ".playground" / "sim-up.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.5)


@pytest.mark.integration
@pytest.mark.real
def test_the_readme_commands_work_on_a_fresh_clone(real_binaries: object, tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path / "clone")
    env = clean_environment()
    try:
        for block in walked_blocks((clone / "README.md").read_text()):
            script = "\n".join(block)
            started = time.monotonic()
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=clone,
                env=env,
                capture_output=True,
                text=True,
                timeout=BLOCK_TIMEOUT,
                check=False,
            )
            took = time.monotonic() - started
            output = (done.stdout + done.stderr)[-4000:]
            assert done.returncode == 0, (
                f"this README block failed after {took:.0f}s:\n{script}\n---\n{output}"
            )
            print(f"README block ({block[0]} ...) passed in {took:.0f}s")
    finally:
        stop_playground(clone)
