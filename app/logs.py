"""Structured JSON logs for both processes: one object per line with the record's extra fields.

Context travels as fields (`extra={"pod": ..., "node": ...}`), the way HAMi logs with klog's key/value
pairs. Values that look like credentials (bearer tokens, PEM blocks) are never written.
"""

from __future__ import annotations

import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}
_SECRET = re.compile(r"(Bearer\s+[A-Za-z0-9._~+/=-]+|-----BEGIN [A-Z ]+-----[\s\S]*?-----END [A-Z ]+-----)")


def redact(text: str) -> str:
    return _SECRET.sub("[redacted]", text)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = redact(value) if isinstance(value, str) else value
        if record.exc_info:
            entry["exc"] = redact(self.formatException(record.exc_info))
        return orjson.dumps(entry, default=str).decode()


def setup(level: str = "INFO") -> None:
    """JSON to stderr for the root logger and the libraries' loggers (gunicorn, leader election)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("gunicorn.error", "gunicorn.access", "leaderelection", "kubernetes", "urllib3"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    logging.getLogger("urllib3").setLevel(logging.WARNING)
