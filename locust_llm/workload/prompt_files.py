"""Prompt files (``--prompts``) and the system prompt file (``--system-prompt``). Pure.

Formats: plain text (one prompt per line), JSONL (``messages``, ``prompt`` or multi-turn ``turns`` per line,
optionally ``max_tokens`` and ``system``), and ShareGPT JSON. Every problem is one :class:`PromptError` line naming the
file, the line (or the conversation) and what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from locust_llm.protocol.tokens import content_text
from locust_llm.workload.draws import PromptError

__all__ = ["Prompt", "load_prompt_file", "load_prompts", "read_system_prompt"]

Message = dict[str, Any]


@dataclass(frozen=True)
class Prompt:
    """One entry of a prompt file: its messages as one request and, for a conversation, its user turns in order
    (after its leading system messages, if any)."""

    messages: tuple[Message, ...]
    max_tokens: int | None = None
    turns: tuple[str, ...] = ()
    system: tuple[Message, ...] = ()

    @property
    def user_turns(self) -> tuple[str, ...]:
        """The user messages of a conversation: the file's turns, or the text of the last message alone."""
        return self.turns or (content_text(self.messages[-1].get("content")),)


def load_prompts(path: str | Path) -> list[Prompt]:
    """Read a prompt file (text, JSONL or ShareGPT JSON, see the module docstring)."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptError(f"--prompts {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptError(f"--prompts {path}: cannot be read ({exc})") from None
    if path.suffix == ".jsonl":
        prompts = _jsonl(path, raw)
    elif path.suffix == ".json":
        prompts = _sharegpt(path, raw)
    else:
        prompts = [Prompt(({"role": "user", "content": line.strip()},)) for line in raw.splitlines() if line.strip()]
    if not prompts:
        raise PromptError(f"--prompts {path}: has no prompts")
    return prompts


def load_prompt_file(text: str, flag: str = "--prompts") -> tuple[Prompt, ...]:
    """The flag-table parser of ``--prompts``: the file's prompts."""
    return tuple(load_prompts(text))


def read_system_prompt(text: str, flag: str = "--system-prompt") -> str:
    """The flag-table parser of ``--system-prompt``: the file's text, stripped."""
    try:
        return Path(text).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptError(f"{flag} {text}: cannot be read ({exc})") from None


def _jsonl(path: Path, raw: str) -> list[Prompt]:
    prompts = []
    for line_no, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PromptError(f"--prompts {path}: line {line_no}: invalid JSON ({exc.msg})") from None
        prompts.append(_row(path, f"line {line_no}", row))
    return prompts


def _row(path: Path, where: str, row: Any) -> Prompt:
    if not isinstance(row, dict):
        raise PromptError(f"--prompts {path}: {where}: expected a JSON object, got {type(row).__name__}")
    max_tokens = row.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise PromptError(f"--prompts {path}: {where}: max_tokens must be an integer >= 1, got {max_tokens!r}")
    if "messages" in row:
        messages = row["messages"]
        if (
            not isinstance(messages, list)
            or not messages
            or not all(isinstance(m, dict) and "role" in m and "content" in m for m in messages)
        ):
            raise PromptError(
                f"--prompts {path}: {where}: 'messages' must be a non-empty list of {{role, content}} objects"
            )
        return Prompt(tuple(messages), max_tokens)
    if isinstance(row.get("prompt"), str) and row["prompt"]:
        return Prompt(({"role": "user", "content": row["prompt"]},), max_tokens)
    if "turns" in row:
        return _turns_row(path, where, row, max_tokens)
    raise PromptError(f"--prompts {path}: {where}: needs 'messages' (a list), 'prompt' (a string) or 'turns' (a list)")


def _turns_row(path: Path, where: str, row: dict[str, Any], max_tokens: int | None) -> Prompt:
    """``{"turns": ["q1", "q2", ...], "system": "..."}``: a conversation's user messages (strings, or
    ``{"role": "user", "content": ...}`` objects)."""
    turns = row["turns"]
    texts = (
        [t.get("content") if isinstance(t, dict) and t.get("role", "user") == "user" else t for t in turns]
        if isinstance(turns, list)
        else []
    )
    if not texts or not all(isinstance(t, str) and t for t in texts):
        raise PromptError(
            f"--prompts {path}: {where}: 'turns' must be a non-empty list of user messages (non-empty strings or "
            f"{{role: user, content}} objects), got {_short(turns)}"
        )
    system = row.get("system")
    if system is not None and not (isinstance(system, str) and system):
        raise PromptError(f"--prompts {path}: {where}: 'system' must be a non-empty string, got {_short(system)}")
    head: tuple[Message, ...] = ({"role": "system", "content": system},) if system else ()
    return Prompt((*head, {"role": "user", "content": texts[-1]}), max_tokens, tuple(map(str, texts)), head)


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}


def _sharegpt(path: Path, raw: str) -> list[Prompt]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PromptError(f"--prompts {path}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(data, list):
        raise PromptError(f"--prompts {path}: expected a JSON list of conversations (ShareGPT format)")
    prompts = []
    for i, item in enumerate(data):
        turns = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(turns, list):
            raise PromptError(f"--prompts {path}: conversation {i}: needs a 'conversations' list")
        messages = []
        for turn in turns:
            if not isinstance(turn, dict) or turn.get("from") not in _ROLES or not isinstance(turn.get("value"), str):
                raise PromptError(f"--prompts {path}: conversation {i}: each turn needs 'from' and a string 'value'")
            messages.append({"role": _ROLES[turn["from"]], "content": turn["value"]})
        while messages and messages[-1]["role"] == "assistant":
            messages.pop()  # the prompt ends with the last human turn
        humans = tuple(m["content"] for m in messages if m["role"] == "user")
        system = tuple(
            m for m in messages[: next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))]
        )
        if humans:
            prompts.append(Prompt(tuple(messages), None, humans if len(humans) > 1 else (), system))
    return prompts
