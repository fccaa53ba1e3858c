"""Logging for the long-running processes: plain text, or one JSON object per line
(``GPUATLAS_LOG_FORMAT=json``, with python-json-logger), each carrying the id of the request
being served (``request_id``; null outside a request).

The API's request log (``gpuatlas.request``: method, path, route, status, duration) replaces
uvicorn's access log, so every line of a request has the same ``request_id`` as the
``X-Request-ID`` header of its answer.
"""

from __future__ import annotations

import logging
import logging.config
from contextvars import ContextVar
from typing import Any, Literal

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
JSON_FIELDS = "%(levelname)s %(name)s %(message)s %(request_id)s"


class RequestIdFilter(logging.Filter):
    """Puts the current request's id on every record (``missing`` outside a request)."""

    def __init__(self, missing: str | None = None) -> None:
        super().__init__()
        self.missing = missing

    def filter(self, record: logging.LogRecord) -> bool:
        rid = REQUEST_ID.get()
        record.request_id = self.missing if rid is None else rid
        record.__dict__.pop("color_message", None)  # uvicorn's ANSI-coloured copy
        return True


def log_config(fmt: Literal["text", "json"], level: str = "INFO") -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` document for the API and the scheduler (also
    given to uvicorn as its ``log_config``, so its own loggers write the same lines)."""
    formatter: dict[str, Any]
    if fmt == "json":
        formatter = {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": JSON_FIELDS,
            "rename_fields": {"levelname": "level", "name": "logger"},
            "timestamp": "time",  # ISO 8601, UTC
        }
    else:
        formatter = {"format": TEXT_FORMAT}
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "default",
        "filters": ["request_id"],
        "stream": "ext://sys.stderr",
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "request_id": {"()": RequestIdFilter, "missing": None if fmt == "json" else "-"}
        },
        "formatters": {"default": formatter},
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": level},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True, "level": level},
            "uvicorn.error": {"handlers": [], "propagate": True, "level": level},
            # the request log below says the same, with the request id
            "uvicorn.access": {"handlers": [], "propagate": False, "level": "WARNING"},
            "alembic": {"level": "WARNING"},
        },
    }


def configure(fmt: Literal["text", "json"], level: str = "INFO") -> None:
    logging.config.dictConfig(log_config(fmt, level))
