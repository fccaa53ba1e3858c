"""The parent side of :mod:`tests.support.kill_child`: start the fork server, have it fork one
ingest, wait for a (killed) child to be gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from service.catalog.bulk import REBUILD_MIN_ROWS
from tests.conftest import ROOT


class KillServer:
    """A running ``tests.support.kill_child`` fork server on ``url`` (see there)."""

    def __init__(
        self,
        url: str,
        rebuild_min_rows: int | None = None,
        per_load_checks_min_rows: int | None = None,
    ) -> None:
        extra = [] if rebuild_min_rows is None else [str(rebuild_min_rows)]
        if per_load_checks_min_rows is not None:
            rebuild = REBUILD_MIN_ROWS if rebuild_min_rows is None else rebuild_min_rows
            extra = [str(rebuild), str(per_load_checks_min_rows)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.kill_child", url, *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            text=True,
        )

    def spawn(self, target: str, url: str | None = None) -> int:
        """Fork a child that ingests record set ``target`` (into ``url``, or the server's
        database); returns its pid once it is about to start."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{target} {url}\n" if url else f"{target}\n")
        self.process.stdin.flush()
        word, pid = self.process.stdout.readline().split()
        assert word == "ready"
        return int(pid)

    @staticmethod
    def wait_dead(pid: int, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.005)
        raise AssertionError(f"child {pid} did not end")

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()
