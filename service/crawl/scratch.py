"""A crawl child's scratch folder, and the sweep of the folders killed processes left.

A crawl in a child process (:mod:`service.crawl.child`) spools its responses (AWS's offer
files run to several GB) into a folder of its own in the temporary directory,
``gpuatlas-run<RUN>-<random>``, which its parent deletes once the child is gone (a crawl
in the ``gpuatlas crawl`` process itself: ``gpuatlas-runcli-<random>``,
:func:`own_scratch`). A parent that is killed (SIGKILL, the OOM killer, a power loss)
deletes nothing, and its child may live on: the child runs in a session of its own, so
it is not killed with its parent; it finishes its crawl and closes its run.

So each folder names the processes that may use it, in two marker files, each
``host:pid:start`` as a run's owner is (:mod:`service.catalog.run_owner`):
:data:`PARENT_MARK`, written when the folder is made, and :data:`CHILD_MARK`, written once
the child is started. :func:`sweep` (run before each crawl in a child and when a scheduler
starts) removes a folder only when nothing can be using it:

* its parent is gone (a live parent deletes its folder itself), and
* its child is gone, with every process of the child's process group (Scrapy's crawl runs
  as the child's own child, in that group).

A folder whose markers cannot tell (no marker, one that is unreadable, or a process of
another host) is kept, unless it is older than :data:`UNMARKED_AFTER`: a folder made
before the markers existed, or by a parent killed between making the folder and starting
its child (or writing the child's marker, a moment later).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from service.catalog.run_owner import group_alive, owner_alive, owner_of, this_owner

PREFIX = "gpuatlas-run"
PARENT_MARK = ".gpuatlas-parent"
CHILD_MARK = ".gpuatlas-child"
UNMARKED_AFTER = 24 * 3600.0
"""Seconds after which a folder whose markers cannot tell who uses it is removed: longer
than any crawl runs (``crawl_timeout_seconds`` is 1,800 by default)."""
MARK_BYTES = 256
"""The most of a marker read (``host:pid:start`` is far shorter)."""
log = logging.getLogger("gpuatlas.crawl")


@contextlib.contextmanager
def scratch_folder(run_id: int | str) -> Iterator[Path]:
    """A new scratch folder for crawl run ``run_id``, marked as this process's, deleted
    when the block ends (whatever is in it)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{run_id}-"))
    try:
        _mark(folder / PARENT_MARK, this_owner())
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def own_scratch() -> Iterator[Path]:
    """This process's temporary files (a crawl's spooled responses, Scrapy's folder) in a
    scratch folder of their own for the block, marked with this process as parent and
    child: if it is killed, the next sweep removes them as soon as it is gone (``gpuatlas
    crawl`` in a terminal, SIGKILLed or OOM-killed halfway through AWS's files)."""
    sweep()
    with scratch_folder("cli") as folder:
        mark_child(folder, os.getpid())
        before, tempfile.tempdir = tempfile.tempdir, str(folder)
        try:
            yield folder
        finally:
            tempfile.tempdir = before


def mark_child(folder: Path, pid: int) -> None:
    """Record process ``pid`` (the crawl's child, just started) as a user of ``folder``."""
    _mark(folder / CHILD_MARK, owner_of(pid))


def _mark(path: Path, owner: str) -> None:
    with contextlib.suppress(OSError):  # unmarked, the folder is kept (see the module)
        path.write_text(owner, encoding="utf-8")


def sweep(directory: Path | None = None, now: float | None = None) -> list[Path]:
    """Remove the scratch folders in ``directory`` (the temporary directory) that no live
    process can be using (see the module's docstring); returns the folders removed. Never
    raises: what cannot be read or removed is left as it is."""
    base = Path(directory or tempfile.gettempdir())
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        entries = [entry for entry in os.scandir(base) if entry.name.startswith(PREFIX)]
    except OSError:
        return removed
    uid = os.getuid()
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)  # a link is never followed, nor removed
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue
        folder = Path(entry.path)
        try:
            unused = _unused(folder, now - info.st_mtime)
        except OSError:  # /proc unreadable of a sudden: keep it, for now
            continue
        if unused:
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                removed.append(folder)
    if removed:
        log.info("removed %d scratch folders left by stopped crawls", len(removed))
    return removed


def _unused(folder: Path, age: float) -> bool:
    """Whether no live process can be using ``folder`` (``age``: seconds since it last
    changed)."""
    parent = owner_alive(_read_mark(folder / PARENT_MARK))
    if parent is None:
        return age > UNMARKED_AFTER
    if parent:
        return False  # its parent deletes it
    mark = _read_mark(folder / CHILD_MARK)
    child = owner_alive(mark)
    if child is None:
        return age > UNMARKED_AFTER
    return not child and not _group_alive(mark)


def _read_mark(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MARK_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MARK_BYTES:
        return None
    try:
        return raw.decode("utf-8").strip() or None
    except UnicodeDecodeError:
        return None


def _group_alive(owner: str | None) -> bool:
    """Whether the process group led by ``owner``'s pid (a crawl child leads its own
    session) still has a live process: Scrapy's, when the child alone was killed. A dead
    child's pid reused as another group's id counts too: the folder is then kept, never
    wrongly removed."""
    try:
        pid = int((owner or "").rsplit(":", 2)[1])
    except (IndexError, ValueError):
        return True
    return group_alive(pid)
