"""Parsers of flag values: text in, a typed value out, or a one-line :class:`ConfigError`. Pure.

Every parser takes ``(text, flag)`` and its error names the flag, the value received and what is allowed, e.g.
``--steps must be strictly increasing, got 8,16,16``.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shlex
import urllib.parse
from dataclasses import dataclass
from typing import Any

from locust_llm.shapes.arrivals import Arrivals

__all__ = [
    "ConfigError",
    "Warmup",
    "parse_arrivals",
    "parse_choice",
    "parse_duration_s",
    "parse_headers",
    "parse_int",
    "parse_json_object",
    "parse_nonnegative_int",
    "parse_number",
    "parse_offset_s",
    "parse_on_off",
    "parse_optional_number",
    "parse_percent",
    "parse_positive_int",
    "parse_positive_number",
    "parse_rates",
    "parse_server_metrics",
    "parse_share",
    "parse_shell_args",
    "parse_statuses",
    "parse_steps",
    "parse_text",
    "parse_warmup",
]


class ConfigError(ValueError):
    """A flag value that cannot be used; the message is one line, ready for the user."""


def parse_text(text: str, flag: str) -> str | None:
    """Free text; empty -> None."""
    value = str(text).strip()
    return value or None


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration_s(text: str, flag: str) -> float:
    """Parse ``30``, ``30s``, ``2m``, ``1m30s``, ``500ms`` or ``1.5h`` into seconds (> 0)."""
    raw = str(text).strip().lower()
    seconds: float | None = None
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        seconds = float(raw)
    elif raw and _DURATION_PART.sub("", raw) == "":
        seconds = sum(float(n) * _UNIT_S[unit] for n, unit in _DURATION_PART.findall(raw))
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{flag} must be a positive duration like 30s, 2m or 1m30s, got {text!r}")
    return seconds


def parse_offset_s(text: str, flag: str) -> float:
    """A duration as :func:`parse_duration_s` parses it, or zero (``0``, ``0s``)."""
    if re.fullmatch(r"0+(?:\.0*)?(?:ms|s|m|h)?", str(text).strip().lower()):
        return 0.0
    try:
        return parse_duration_s(text, flag)
    except ConfigError:
        raise ConfigError(f"{flag} must be a duration >= 0 like 0s, 30s or 10m, got {text!r}") from None


def parse_steps(text: str, flag: str = "--steps") -> tuple[int, ...]:
    """Parse ``8,16,32`` into a strictly increasing tuple of positive user counts."""
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or not all(re.fullmatch(r"\d+", p) for p in parts):
        raise ConfigError(f"{flag} must be comma-separated positive integers like 8,16,32, got {text!r}")
    steps = tuple(int(p) for p in parts)
    if steps[0] < 1:
        raise ConfigError(f"{flag} user counts must be >= 1, got {text}")
    if any(b <= a for a, b in itertools.pairwise(steps)):
        raise ConfigError(f"{flag} must be strictly increasing, got {text}")
    return steps


@dataclass(frozen=True)
class Warmup:
    """How long samples after a step change are kept apart: ``auto``, a fixed time, or a share of the step.

    - auto: ``min(max(5 s, 10 % of the step), half the step)``, stretched at each step change to cover the previous
      step's E2E p90, still at most half the step (``measure.health.warmup_for``; docs/methodology.md, "Steps,
      warm-up and drain");
    - fixed ``seconds_s``: at most the whole step;
    - ``share`` (0..1) of the step.
    """

    seconds_s: float | None = None
    share: float | None = None

    def for_step(self, step_s: float) -> float:
        """Seconds of warm-up for a step of ``step_s`` seconds (see the class docstring)."""
        if self.share is not None:
            return step_s * self.share
        if self.seconds_s is not None:
            return min(self.seconds_s, step_s)
        return min(max(5.0, 0.1 * step_s), 0.5 * step_s)

    @property
    def is_auto(self) -> bool:
        return self.seconds_s is None and self.share is None

    def describe(self) -> str:
        if self.share is not None:
            return f"{100 * self.share:g}%"
        return "auto" if self.seconds_s is None else f"{self.seconds_s:g}s"


def parse_warmup(text: str, flag: str = "--warmup") -> Warmup:
    """``auto`` -> automatic; ``10%`` -> a share of the step; a duration (or ``0``) -> fixed seconds."""
    raw = str(text).strip().lower()
    if raw in ("", "auto"):
        return Warmup()
    if raw.endswith("%"):
        number = raw[:-1].strip()
        if re.fullmatch(r"\d+(?:\.\d+)?", number) and 0 <= float(number) < 100:
            return Warmup(share=float(number) / 100.0)
        raise ConfigError(f"{flag} share must be a percentage in [0, 100), got {text!r}")
    if raw in ("0", "0s"):
        return Warmup(seconds_s=0.0)
    try:
        return Warmup(seconds_s=parse_duration_s(raw, flag))
    except ConfigError:
        raise ConfigError(f"{flag} must be auto, a duration like 5s or a share like 10%, got {text!r}") from None


def parse_choice(text: str, flag: str, allowed: tuple[str, ...]) -> str:
    raw = str(text).strip().lower()
    if raw not in allowed:
        raise ConfigError(f"{flag} must be one of {', '.join(allowed)}, got {text!r}")
    return raw


def parse_on_off(text: str, flag: str) -> bool:
    return parse_choice(text, flag, ("on", "off")) == "on"


def parse_percent(text: str, flag: str) -> float:
    """A percentage > 0 (``80`` or ``80%``; 100 = one core)."""
    raw = str(text).strip().rstrip("%")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 10_000:
        raise ConfigError(f"{flag} must be a percentage > 0 (100 = one core), got {text!r}")
    return value


def parse_share(text: str, flag: str) -> float:
    """A share strictly between 0 and 1: ``10%`` or ``0.1``."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise ConfigError(f"{flag} must be a share above 0 and below 100%, like 10% or 0.1, got {text!r}")
    return value


def parse_positive_number(text: str, flag: str) -> float:
    """A number > 0."""
    value = parse_optional_number(text, flag)
    if value is None or value <= 0:
        raise ConfigError(f"{flag} must be a number > 0, got {text!r}")
    return value


def parse_optional_number(text: str | None, flag: str, upper: float | None = None) -> float | None:
    """An optional non-negative number (empty -> None), at most ``upper`` when given."""
    if text is None or str(text).strip() == "":
        return None
    try:
        value = float(str(text).strip())
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0 or (upper is not None and value > upper):
        allowed = f"a number in [0, {upper:g}]" if upper is not None else "a number >= 0"
        raise ConfigError(f"{flag} must be {allowed}, got {text!r}")
    return value


def parse_number(text: str, flag: str) -> float:
    """A required non-negative number."""
    value = parse_optional_number(text, flag)
    if value is None:
        raise ConfigError(f"{flag} must be a number >= 0, got {text!r}")
    return value


def parse_int(text: str, flag: str) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise ConfigError(f"{flag} must be an integer, got {text!r}") from None


def parse_nonnegative_int(text: str, flag: str) -> int:
    if not re.fullmatch(r"\d+", str(text).strip()):
        raise ConfigError(f"{flag} must be an integer >= 0, got {text!r}")
    return int(text)


def parse_positive_int(text: str, flag: str) -> int:
    if not re.fullmatch(r"\d+", str(text).strip()) or int(text) < 1:
        raise ConfigError(f"{flag} must be an integer >= 1, got {text!r}")
    return int(text)


def parse_statuses(text: str, flag: str) -> frozenset[int]:
    """``429,503`` -> frozenset({429, 503}): comma-separated HTTP statuses."""
    statuses = []
    for part in str(text).split(","):
        if not re.fullmatch(r"\s*[1-5]\d\d\s*", part):
            raise ConfigError(f"{flag} must be comma-separated HTTP statuses like 429,503, got {text!r}")
        statuses.append(int(part))
    return frozenset(statuses)


def parse_json_object(text: str, flag: str) -> dict[str, Any] | None:
    """A JSON object (empty -> None)."""
    if not str(text).strip():
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{flag} must be a JSON object, got invalid JSON ({exc.msg} at {exc.pos}): {text!r}"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(f"{flag} must be a JSON object, got {type(value).__name__}: {text!r}")
    return value


_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


def parse_headers(values: Any, flag: str = "--header") -> tuple[tuple[str, str], ...]:
    """``'Name: value'`` (one string, or a list of them for a repeatable flag; blank entries are skipped) ->
    ((name, value), ...). Errors never show a value, which may be a secret: only a valid-looking name, or the
    header's position."""
    if not values:
        return ()
    if isinstance(values, str):
        values = [values]
    out = []
    for number, text in enumerate((str(v) for v in values if str(v).strip()), start=1):
        name, sep, value = text.partition(":")
        if not sep:
            raise ConfigError(f"{flag} must be 'Name: value', got header #{number} without a ':' (value not shown)")
        if not _HEADER_NAME.fullmatch(name.strip()):
            shown = repr(name.strip()) if len(name.strip()) <= 40 and " " not in name.strip() else f"#{number}"
            raise ConfigError(f"{flag} must be 'Name: value' with a valid header name, got header {shown}")
        out.append((name.strip(), value.strip()))
    return tuple(out)


def parse_shell_args(text: str, flag: str) -> tuple[str, ...]:
    """Split like a shell: ``--capacity 4 --model 'a b'`` -> ('--capacity', '4', '--model', 'a b')."""
    try:
        return tuple(shlex.split(text or ""))
    except ValueError as exc:
        raise ConfigError(f"{flag} cannot be split into arguments ({exc}), got {text!r}") from None


def parse_arrivals(text: str, flag: str = "--arrivals") -> Arrivals:
    """``poisson``, ``constant`` or ``gamma:CV`` with ``CV > 0``."""
    raw = str(text).strip().lower()
    if raw in ("poisson", "constant"):
        return Arrivals(raw)
    match = re.fullmatch(r"gamma:(\d+(?:\.\d+)?)", raw)
    if match and 0 < float(match.group(1)) <= 100:
        return Arrivals("gamma", float(match.group(1)))
    raise ConfigError(f"{flag} must be one of poisson, constant, gamma:CV (0 < CV <= 100), got {text!r}")


def parse_rates(text: str, flag: str = "--rates") -> tuple[float, ...]:
    """Parse ``2,4,8.5`` into a strictly increasing tuple of positive request rates (per second)."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        rates = tuple(float(p) for p in parts)
    except ValueError:
        raise ConfigError(f"{flag} must be comma-separated request rates per second like 2,4,8, got {text!r}") from None
    if not all(math.isfinite(r) and r > 0 for r in rates):
        raise ConfigError(f"{flag} rates must be positive numbers, got {text}")
    if any(b <= a for a, b in itertools.pairwise(rates)):
        raise ConfigError(f"{flag} must be strictly increasing, got {text}")
    return rates


def parse_server_metrics(text: str, flag: str = "--server-metrics") -> tuple[str, ...]:
    """``auto``, ``off`` or comma-separated ``http(s)://`` or ``dns+http(s)://NAME:PORT/path`` URLs: ``("auto",)``,
    ``()`` or the URLs."""
    raw = str(text).strip()
    if raw.lower() in ("auto", "off"):
        return () if raw.lower() == "off" else ("auto",)
    urls = tuple(u.strip() for u in raw.split(","))
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https", "dns+http", "dns+https") or not parts.hostname:
            raise ConfigError(
                f"{flag} must be auto, off or http(s):// or dns+http(s)://NAME:PORT/metrics URLs separated by commas, "
                f"got {url!r}"
            )
    return urls
