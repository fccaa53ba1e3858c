"""A crawl child's scratch folder outlives a killed parent only while a process can use it.

The folders' markers name real processes here: this one (alive), processes started and
killed (gone), and a process group whose leader has exited while its child lives on (a
crawl child killed while Scrapy's process still runs). The orphan case runs for real: a
parent process SIGKILLed while its crawl child goes on spooling.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from service.catalog.run_owner import owner_alive, owner_of, this_owner
from service.core.config import PROJECT_ROOT, Settings
from service.crawl.child import run_crawl_in_child
from service.crawl.scratch import (
    CHILD_MARK,
    MARK_BYTES,
    PARENT_MARK,
    PREFIX,
    UNMARKED_AFTER,
    mark_child,
    own_scratch,
    scratch_folder,
    sweep,
)


def gone_owner() -> str:
    """The identity of a process that existed and is gone."""
    proc = subprocess.Popen(["sleep", "30"])
    owner = owner_of(proc.pid)
    proc.kill()
    proc.wait()
    return owner


@pytest.fixture
def living() -> Iterator[str]:
    """The identity of a process that runs in a session of its own (a crawl child)."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        yield owner_of(proc.pid)
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def leaderless() -> Iterator[str]:
    """The identity of a process gone whose process group lives on (its own child)."""
    proc = subprocess.Popen(
        ["sh", "-c", "sleep 60 & read line"],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    owner = owner_of(proc.pid)
    assert proc.stdin is not None
    proc.stdin.close()  # the shell ends; its sleep, in the same group, does not
    proc.wait()
    try:
        yield owner
    finally:
        os.killpg(proc.pid, signal.SIGKILL)


def folder(base: Path, name: str, parent: str | None, child: str | None, age: float = 0) -> Path:
    path = base / f"{PREFIX}{name}"
    path.mkdir()
    (path / "spooled.payload").write_bytes(b"\0" * 1000)
    if parent is not None:
        (path / PARENT_MARK).write_text(parent)
    if child is not None:
        (path / CHILD_MARK).write_text(child)
    if age:
        then = time.time() - age
        os.utime(path, (then, then))
    return path


def test_a_folder_is_removed_only_when_no_process_can_use_it(
    tmp_path: Path, living: str, leaderless: str
) -> None:
    dead, old = gone_owner(), UNMARKED_AFTER + 60
    assert owner_alive(dead) is False and owner_alive(living) is True
    assert owner_alive(leaderless) is False
    kept = [
        folder(tmp_path, "1-parent-alive", this_owner(), None),
        folder(tmp_path, "2-parent-alive-child-gone", this_owner(), dead),
        folder(tmp_path, "3-orphaned-child-alive", dead, living),
        folder(tmp_path, "4-child-gone-its-group-alive", dead, leaderless),
        folder(tmp_path, "5-child-not-marked-yet", dead, None),
        folder(tmp_path, "6-no-marker-recent", None, None),
        folder(tmp_path, "7-parent-on-another-host", f"elsewhere:{os.getpid()}:1", dead),
        folder(tmp_path, "8-old-but-parent-alive", this_owner(), None, old),
    ]
    removed = [
        folder(tmp_path, "10-both-gone", dead, dead),
        folder(tmp_path, "11-parent-gone-child-never-marked", dead, None, old),
        folder(tmp_path, "12-no-marker-old", None, None, old),
    ]
    assert sorted(sweep(tmp_path)) == sorted(removed)
    assert all(path.is_dir() for path in kept)
    assert not any(path.exists() for path in removed)
    assert sweep(tmp_path) == []  # nothing more to remove


def test_hostile_and_unrelated_entries_are_left_alone(tmp_path: Path) -> None:
    dead, old = gone_owner(), UNMARKED_AFTER + 60
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / PARENT_MARK).write_text(dead)
    (outside / CHILD_MARK).write_text(dead)
    (outside / "precious").write_text("not a scratch folder")
    base = tmp_path / "tmp"
    base.mkdir()
    (base / f"{PREFIX}1-link").symlink_to(outside)  # a link is never followed
    (base / f"{PREFIX}2-file").write_text(dead)  # a file, not a folder
    (base / "gpuatlas-crawl-3").mkdir()  # another prefix
    garbage = [
        folder(base, "4-garbage-marks", "not an owner at all", "::::", old / 2),
        folder(base, "5-binary-mark", None, None),
        folder(base, "6-huge-mark", "x" * (MARK_BYTES * 100), None),
    ]
    (garbage[1] / PARENT_MARK).write_bytes(b"\xff\xfe\x00host:1:2")
    host = dead.split(":")[0]
    impossible = folder(base, "7-pids-out-of-range", dead, f"{host}:99999999999999999999:1")
    with_link = folder(base, "8-garbage-old", "not an owner at all", None)
    (with_link / "link-inside").symlink_to(outside)  # removed with its folder, not followed
    os.utime(with_link, (time.time() - old, time.time() - old))
    assert sorted(sweep(base)) == [impossible, with_link]
    assert (outside / "precious").read_text() == "not a scratch folder"
    assert (base / f"{PREFIX}1-link").is_symlink() and (base / f"{PREFIX}2-file").is_file()
    assert (base / "gpuatlas-crawl-3").is_dir()
    assert all(path.is_dir() for path in garbage)
    assert sweep(tmp_path / "missing") == []  # no such folder: nothing, no error


def test_the_scratch_folder_is_marked_and_deleted(tmp_path: Path, living: str) -> None:
    with scratch_folder(7) as scratch:
        assert scratch.name.startswith(f"{PREFIX}7-")
        assert (scratch / PARENT_MARK).read_text() == this_owner()
        mark_child(scratch, int(living.split(":")[1]))
        assert (scratch / CHILD_MARK).read_text() == living
        assert sweep(scratch.parent) == []  # its parent (this process) is alive
        assert scratch.is_dir()
    assert not scratch.exists()


def test_a_crawl_in_a_child_sweeps_what_killed_crawls_left(
    sqlite_engine: Engine,
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = tmp_path / "tmp"
    base.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(base))
    dead = gone_owner()
    left = folder(base, "1-left", dead, dead)
    exiting = tmp_path / "python"  # stands in for the interpreter: exits at once
    exiting.write_text("#!/bin/sh\nexit 3\n")
    exiting.chmod(exiting.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(sys, "executable", str(exiting))
    settings = Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    outcome = run_crawl_in_child(sqlite_engine, settings, "oracle")
    assert outcome.label == "failed: crashed"
    assert not left.exists()
    assert list(base.iterdir()) == []  # its own folder is deleted too


PARENT = """
import sys
from service.core.config import Settings
from service.core.db import make_engine
from service.crawl.child import run_crawl_in_child

sys.executable = {interpreter!r}
url = {url!r}
settings = Settings(database_url=url, environment="test", _env_file=None)
run_crawl_in_child(make_engine(url), settings, "oracle")
"""


def test_a_killed_parents_folder_is_kept_while_its_child_runs(
    sqlite_engine: Engine, sqlite_url: str, tmp_path: Path
) -> None:
    """The parent is SIGKILLed while its crawl child spools; the child, in a session of
    its own, goes on. The folder is kept while it runs and removed once it has ended."""
    base, where, release = tmp_path / "tmp", tmp_path / "where", tmp_path / "release"
    base.mkdir()
    spooling = tmp_path / "python"  # stands in for the interpreter: spools until released
    spooling.write_text(
        "#!/bin/sh\n"
        'head -c 100000 /dev/zero > "$TMPDIR/spooled.payload"\n'
        f'echo "$TMPDIR" > {where}.part && mv {where}.part {where}\n'
        f"while [ ! -e {release} ]; do sleep 0.05; done\n"
        'echo more >> "$TMPDIR/spooled.payload"\n'
    )
    spooling.chmod(spooling.stat().st_mode | stat.S_IEXEC)
    script = PARENT.format(interpreter=str(spooling), url=sqlite_url)
    env = {**os.environ, "TMPDIR": str(base), "PYTHONPATH": str(PROJECT_ROOT)}
    parent = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        deadline = time.monotonic() + 60
        while not where.exists():
            assert parent.poll() is None, "the parent ended before its child started"
            assert time.monotonic() < deadline, "the crawl child never started"
            time.sleep(0.05)
        scratch = Path(where.read_text().strip())
        assert scratch.parent == base
        child = (scratch / CHILD_MARK).read_text()
        assert owner_alive(child) is True
    finally:
        parent.kill()  # SIGKILL: no cleanup of its own
        parent.wait()
    assert sweep(base) == [] and (scratch / "spooled.payload").exists()  # the child runs
    release.touch()
    deadline = time.monotonic() + 30
    while owner_alive(child):
        assert time.monotonic() < deadline, "the crawl child did not end"
        time.sleep(0.05)
    assert sweep(base) == [scratch]
    assert not scratch.exists()


KILLED_CLI = """
import os, signal, sys, tempfile
from service.crawl.scratch import own_scratch

with own_scratch() as folder:
    with tempfile.NamedTemporaryFile(delete=False, suffix=".payload") as spooled:
        spooled.write(b"0" * 100_000)
    print(spooled.name, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_cli_crawls_spooled_files_are_swept(tmp_path: Path) -> None:
    """``gpuatlas crawl`` spools into a folder of its own (it is both the folder's parent
    and child): SIGKILLed halfway, its files go at the next sweep, not a day later."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(PROJECT_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", KILLED_CLI], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    spooled = Path(done.stdout.strip())
    assert spooled.parent.parent == tmp_path and spooled.parent.name.startswith(f"{PREFIX}cli-")
    assert spooled.exists()
    assert sweep(tmp_path) == [spooled.parent]
    assert not spooled.exists()


def test_own_scratch_holds_this_process_temporary_files(tmp_path: Path) -> None:
    import tempfile

    before = tempfile.gettempdir()
    with own_scratch() as folder:
        assert tempfile.gettempdir() == str(folder)
        assert (folder / CHILD_MARK).read_text() == (folder / PARENT_MARK).read_text()
        assert sweep(folder.parent) == []  # this process lives
    assert tempfile.gettempdir() == before and not folder.exists()
