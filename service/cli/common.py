"""What every command module shares: the error handling, the stderr console, the exit codes,
the settings and the process's one engine, and the ``--format`` option.

Exit codes: 0 ok, 1 error, 2 usage, 3 partial failure (some crawls failed).
Errors print one line on stderr; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from service.cli.output import Format
from service.core.config import Settings, get_settings
from service.core.db import DatabaseConfigError, make_engine, shown_url
from service.core.revision import unmigrated_reason

err = Console(stderr=True, soft_wrap=True)
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3
_state: dict[str, Any] = {"debug": False}
F = TypeVar("F", bound=Callable[..., Any])

FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table, json, jsonl or csv")]


class CliError(Exception):
    """A failure meant for people: printed as one line."""


class UsageProblem(Exception):
    """The command was called wrongly: one line, exit code 2."""


def set_debug(debug: bool) -> None:
    """``--debug``: errors show their traceback."""
    _state["debug"] = debug


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, DBAPIError):
        message = str(exc.orig) if exc.orig is not None else str(exc)
        return f"database error: {message.strip().splitlines()[0]}"
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def handle_errors(func: F) -> F:
    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except UsageProblem as exc:
            err.print(f"[red]usage error:[/red] {exc}", markup=True, highlight=False)
            raise typer.Exit(EXIT_USAGE) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None
        except Exception as exc:
            if _state["debug"]:
                traceback.print_exc()
            err.print(f"[red]error:[/red] {_one_line(exc)}", markup=True, highlight=False)
            raise typer.Exit(EXIT_ERROR) from None
        finally:
            opened = _state.pop("engine", None)
            if opened is not None:
                opened.dispose()

    return wrapper  # type: ignore[return-value]


def settings() -> Settings:
    return get_settings()


def _sqlite_file_exists(url: str) -> None:
    """A command that needs a migrated catalog names a SQLite file that is not there,
    instead of creating an empty one (``db upgrade`` creates it)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return  # make_engine says what is wrong with it
    path = parsed.database
    if parsed.get_backend_name() != "sqlite" or not path or path == ":memory:":
        return
    if path.startswith("file:") or parsed.query.get("uri"):
        return  # a URI filename: SQLite's own options decide
    if Path(path).parent.is_dir() and not Path(path).exists():  # (no folder: cannot open)
        raise CliError(f"no database at {path}: `gpuatlas db upgrade` creates it")


def engine(*, migrated: bool = True) -> Engine:
    """The process's one engine (disposed when the command ends). Its database must be
    migrated to this gpuatlas's head, or with ``migrated=False`` only reachable (``db``)."""
    if _state.get("engine") is not None:
        return _state["engine"]  # type: ignore[no-any-return]
    try:
        if migrated:  # opening a missing SQLite file would leave an empty one behind
            _sqlite_file_exists(settings().database_url)
        eng = make_engine(settings().database_url)
        _state["engine"] = eng
        if migrated:
            reason = unmigrated_reason(eng)
            if reason is not None:
                raise CliError(reason)
        else:
            eng.connect().close()
    except OperationalError as exc:
        url = shown_url(settings().database_url)  # its password masked
        raise CliError(f"cannot open database {url}: {_one_line(exc)}") from None
    except DatabaseConfigError as exc:
        raise CliError(str(exc)) from None
    return eng
