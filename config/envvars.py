"""Reading one environment variable of config/settings.py into a typed value, and the error that says why
one cannot be read.

Invariants owned here: an unset or empty variable is its default; a value that does not parse or is out
of range raises `SettingsError` with one readable line that names the variable and quotes the value as
given (`NAME='raw': why`), so a bad setting fails the process at start, before any library sees it. The
readers take the environment as an argument (tests never touch os.environ).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from app.core.nodelock import parse_go_duration


class SettingsError(ValueError):
    """A setting is invalid; the message names the variable."""


_TRUE = ("1", "t", "true", "yes", "on")
_FALSE = ("0", "f", "false", "no", "off")


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SettingsError(f"{name}={raw!r}: expected true or false")


def env_int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise SettingsError(f"{name}={raw!r}: expected an integer") from None
    if not low <= value <= high:
        raise SettingsError(f"{name}={raw!r}: must be between {low} and {high}")
    return value


def env_duration(env: Mapping[str, str], name: str, default: timedelta) -> timedelta:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = parse_go_duration(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r}: expected a duration such as 5m, 30s or 1h30m") from None
    if value <= timedelta(0):
        raise SettingsError(f"{name}={raw!r}: must be positive")
    return value


def env_choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of `choices` (case-insensitive); the first when unset."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return choices[0]
    if raw.lower() not in choices:
        raise SettingsError(f"{name}={raw!r}: expected one of {', '.join(choices)}")
    return raw.lower()


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def env_level(env: Mapping[str, str], name: str, default: str, extra: tuple[str, ...] = ()) -> str:
    """A log level name, case-insensitive (WARN is WARNING); `extra` adds accepted words such as OFF."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().upper()
    value = "WARNING" if value == "WARN" else value
    known = (*LOG_LEVELS, *extra)
    if value not in known:
        raise SettingsError(f"{name}={raw!r}: expected one of {', '.join(known)}")
    return value
