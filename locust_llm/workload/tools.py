"""Tool schemas (``--tools FILE``: OpenAI's format, each ``parameters`` a valid JSON Schema) and the share of turns
that ask for a call (``--tool-call-share``). A bad file is one line naming the tool and the problem. Pure.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from locust_llm.workload.draws import PromptError

__all__ = ["load_tools", "parse_tool_share"]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def load_tools(text: str, flag: str = "--tools") -> tuple[dict[str, Any], ...]:
    """The flag-table parser of ``--tools``: the file's tools, checked (module docstring)."""
    try:
        tools = orjson.loads(Path(text).read_bytes())
    except OSError as exc:
        raise PromptError(f"{flag} {text}: cannot be read ({exc.strerror or exc})") from None
    except orjson.JSONDecodeError as exc:
        raise PromptError(f"{flag} {text}: not JSON ({exc})") from None
    if not isinstance(tools, list) or not tools:
        raise PromptError(f"{flag} {text}: must be a non-empty JSON array of tools, got {type(tools).__name__}")
    for number, tool in enumerate(tools, start=1):
        _check(text, flag, number, tool)
    return tuple(tools)


def _check(path: str, flag: str, number: int, tool: Any) -> None:
    where = f"{flag} {path}: tool #{number}"
    function = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
        raise PromptError(f'{where} must be {{"type": "function", "function": {{...}}}}, got {str(tool)[:80]}')
    name = function.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PromptError(f"{where}: 'name' must be 1-64 letters, digits, _ or -, got {name!r}")
    schema = function.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(schema, dict):
        raise PromptError(f"{where} ({name}): 'parameters' must be a JSON Schema object, got {str(schema)[:80]}")
    import jsonschema  # here: only a run given --tools pays for its import (70 ms at every start otherwise)

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise PromptError(f"{where} ({name}): 'parameters' is not valid JSON Schema: {exc.message}") from None


def parse_tool_share(text: str, flag: str = "--tool-call-share") -> float:
    """A share of turns from 0 to 1: ``25%`` or ``0.25``."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise PromptError(f"{flag} must be a share from 0 to 100%, like 25% or 0.25, got {text!r}")
    return value
