"""Gunicorn workers booting together open a NEW ledger at the same moment: every one of them must get it
(switching the file to WAL can be refused without SQLite's busy handler; `_enable_wal` retries,
app/state/ledgerdb.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

OPENER = """
import sys, time
from pathlib import Path
from app.state.ledger import Ledger
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
ledger = Ledger(Path(sys.argv[1]))
ledger.close()
"""


def test_processes_opening_a_new_ledger_at_once_all_succeed(tmp_path: Path) -> None:
    for attempt in range(3):
        state = tmp_path / f"state-{attempt}"
        start = time.time() + 2.0  # after every interpreter has started
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPENER, str(state), str(start)], stderr=subprocess.PIPE, text=True
            )
            for _ in range(6)
        ]
        results = []
        try:
            for p in procs:
                _, err = p.communicate(timeout=60)
                results.append((p.returncode, err))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
        assert all(code == 0 for code, _ in results), [err for code, err in results if code]
        assert (state / "ledger.db").exists()
