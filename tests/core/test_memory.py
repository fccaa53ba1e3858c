"""``service.core.memory.tune_allocator``: the threads of a batch command allocate from
one glibc arena (checked with glibc's own ``malloc_stats`` in a child process), and large
blocks freed go back to the system (the child's resident memory)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = """
import ctypes, sys, threading
from service.core.memory import tune_allocator
applied = tune_allocator() if sys.argv[1] == "one" else None
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


FREED = """
import sys
from service.core.memory import tune_allocator
applied = tune_allocator() if sys.argv[1] == "tuned" else None
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
base = rss()
big = bytearray(8 << 20)
del big  # a mapped block freed: by default glibc raises its threshold past 8 MiB
blocks = []
for _ in range(200):
    blocks.append(bytearray(256 << 10))  # 50 MiB in blocks of 256 KiB
    blocks.append(bytearray(2000))  # each followed by a small block that stays
small = blocks[1::2]
del blocks
print(applied, rss() - base)
"""


def _kept_mib(mode: str) -> tuple[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", FREED, mode], capture_output=True, text=True, check=True
    )
    applied, kept = done.stdout.split()
    return applied, int(kept)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator only")
def test_large_blocks_freed_go_back_to_the_system() -> None:
    applied, kept = _kept_mib("tuned")
    if applied == "False":
        pytest.skip("not glibc: mallopt is not there")
    assert applied == "True" and kept < 10  # the 50 MiB of blocks freed are given back
    _, default = _kept_mib("default")
    assert default > 40  # glibc's raised threshold put them on the heap, held by the rest


def test_a_batch_command_asks_for_one_arena_and_serve_does_not(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from service.cli import app as cli
    from service.core import memory

    calls: list[str] = []
    monkeypatch.setattr(memory, "tune_allocator", lambda: calls.append("one") or True)
    from typer.testing import CliRunner

    runner = CliRunner()
    runner.invoke(cli.app, ["sources"])
    assert calls == ["one"]
    runner.invoke(cli.app, ["serve", "--help"])
    assert calls == ["one"]
