"""``service.core.memory.one_malloc_arena``: the threads of a batch command allocate from
one glibc arena (checked with glibc's own ``malloc_stats`` in a child process)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = """
import ctypes, sys, threading
from service.core.memory import one_malloc_arena
applied = one_malloc_arena() if sys.argv[1] == "one" else None
def work():
    blocks = [bytearray(3000) for _ in range(20000)]  # past the thread's small caches
    del blocks
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
sys.stderr.flush()
print(applied, flush=True)
ctypes.CDLL(None).malloc_stats()  # one "Arena N:" block per arena, on stderr
"""


def _arenas(mode: str) -> tuple[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True
    )
    return done.stdout.strip(), done.stderr.count("Arena ")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator only")
def test_threads_share_one_arena() -> None:
    applied, arenas = _arenas("one")
    if applied == "False":
        pytest.skip("not glibc: mallopt is not there")
    assert (applied, arenas) == ("True", 1)
    _, default = _arenas("default")
    assert default > 1  # each thread had grown an arena of its own


def test_a_batch_command_asks_for_one_arena_and_serve_does_not(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from service.cli import app as cli
    from service.core import memory

    calls: list[str] = []
    monkeypatch.setattr(memory, "one_malloc_arena", lambda: calls.append("one") or True)
    from typer.testing import CliRunner

    runner = CliRunner()
    runner.invoke(cli.app, ["sources"])
    assert calls == ["one"]
    runner.invoke(cli.app, ["serve", "--help"])
    assert calls == ["one"]
