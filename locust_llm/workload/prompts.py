"""What is sent: prompt sources, synthetic lengths, a shared system prefix and per-request salt. Pure.

Sources (one per run):

- **built-in**: short, varied prompts (the default);
- **file** (``--prompts FILE``): plain text (one prompt per line), JSONL (one ``{"messages": [...]}`` or
  ``{"prompt": "..."}`` object per line, optionally with ``"max_tokens"``), or a ShareGPT-style JSON list of
  ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}`` (the human turns up to the last
  one become the messages);
- **synthetic** (``--input-tokens MEAN[:STDDEV]``): prompts of about that many tokens, drawn from a normal
  distribution (clipped to at least 1) with a seeded generator. Lengths are counted as 4 bytes per token, the
  usual rule of thumb for English text with BPE tokenizers (and the simulator's own count).

Output lengths (``--max-tokens MEAN[:STDDEV]``) are drawn the same way; a row's own ``max_tokens`` wins.
A shared system prompt (``--system-prompt FILE``) is prepended to every request, marked with
``cache_control: {"type": "ephemeral"}`` when ``--cache-control`` is on. A salt (a random tag at the start of the
user message) keeps unintended prefix-cache hits from flattering TTFT: on by default for synthetic prompts.
Everything random comes from one ``random.Random`` per user, seeded from ``--seed`` and the user's number.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from locust_llm.parsers import ConfigError
from locust_llm.tokens import content_text, estimate_prompt_tokens

__all__ = [
    "BUILTIN_TEMPLATES",
    "Length",
    "PromptError",
    "Workload",
    "chat_body",
    "estimate_prompt_tokens",
    "load_prompt_file",
    "load_prompts",
    "parse_length",
    "read_system_prompt",
    "synthetic_text",
]

BUILTIN_TEMPLATES = (
    "Explain concept {i} of distributed systems in two sentences.",
    "Write a four-line poem about the number {i}.",
    "Summarise the plot of an imaginary novel titled 'Chapter {i}' in three sentences.",
    "List three practical tips for debugging issue #{i} in a web service.",
    "Describe, for a ten-year-old, why the sky looks different on day {i} of a trip.",
    "Give a short recipe idea that uses exactly {i} grams of flour.",
    "Compare two sorting algorithms for an array of {i} elements in a short paragraph.",
    "Translate the phrase 'load test number {i}' into French, German and Spanish.",
)

_FILLER = (
    "the quick brown fox jumps over lazy dogs while seven bright stars shine above quiet hills and rivers carry "
    "old stories toward distant seas where sailors share bread songs and careful plans"
).split()

Message = dict[str, Any]


class PromptError(ConfigError):
    """A prompt file or length that cannot be used; one line naming the file, the line and the problem."""


@dataclass(frozen=True)
class Length:
    """A length distribution: normal with ``mean`` and ``stddev``, clipped to ``[1, inf)``."""

    mean: int
    stddev: float = 0.0

    def draw(self, rng: random.Random) -> int:
        if self.stddev <= 0:
            return self.mean
        return max(1, round(rng.gauss(self.mean, self.stddev)))


def parse_length(text: str, flag: str) -> Length:
    """``128`` or ``128:32`` (mean:stddev) -> :class:`Length`."""
    mean, sep, std = str(text).strip().partition(":")
    try:
        length = Length(int(mean), float(std) if sep else 0.0)
    except ValueError:
        raise PromptError(f"{flag} must be MEAN or MEAN:STDDEV with an integer mean >= 1, got {text!r}") from None
    if length.mean < 1 or length.stddev < 0:
        raise PromptError(f"{flag} must be MEAN or MEAN:STDDEV with an integer mean >= 1, got {text!r}")
    return length


def synthetic_text(tokens: int, rng: random.Random) -> str:
    """About ``tokens`` tokens (4 bytes each) of filler words."""
    words: list[str] = []
    size = 0
    target = 4 * tokens
    while size < target:
        word = rng.choice(_FILLER)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[: max(1, target - 1)]


def chat_body(model: str, messages: Sequence[Message], max_tokens: int, extra: dict[str, Any] | None = None) -> bytes:
    """The JSON body of a streamed chat completion that asks for a final ``usage`` chunk; ``extra`` is merged in."""
    body: dict[str, Any] = {
        "model": model,
        "messages": list(messages),
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if extra:
        body.update(extra)
    return orjson.dumps(body)


@dataclass(frozen=True)
class Prompt:
    messages: tuple[Message, ...]
    max_tokens: int | None = None


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
    raise PromptError(f"--prompts {path}: {where}: needs 'messages' (a list) or 'prompt' (a string)")


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
        if messages:
            prompts.append(Prompt(tuple(messages)))
    return prompts


@dataclass(frozen=True)
class Workload:
    """How each request's messages and ``max_tokens`` are made (module docstring); immutable and shared."""

    max_tokens: Length = Length(128)
    prompts: tuple[Prompt, ...] = ()
    input_tokens: Length | None = None
    system_prompt: str | None = None
    cache_control: bool = False
    salt: bool | None = None  # None: on for synthetic prompts only
    extra_body: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        """The workload for reports: where prompts come from, never their text."""
        source = "file" if self.prompts else ("synthetic" if self.input_tokens is not None else "built-in")
        return {
            "source": source,
            "prompts": len(self.prompts) or None,
            "input_tokens": None if self.input_tokens is None else [self.input_tokens.mean, self.input_tokens.stddev],
            "max_tokens": [self.max_tokens.mean, self.max_tokens.stddev],
            "system_prompt": self.system_prompt is not None,
            "cache_control": self.cache_control,
            "salted": self.salted,
            "extra_body_keys": sorted(self.extra_body) if self.extra_body else [],
        }

    @property
    def salted(self) -> bool:
        return self.salt if self.salt is not None else self.input_tokens is not None

    def messages(self, rng: random.Random) -> tuple[list[Message], int]:
        """``(messages, max_tokens)`` of the next request."""
        max_tokens = self.max_tokens.draw(rng)
        if self.prompts:
            prompt = rng.choice(self.prompts)
            messages = [dict(m) for m in prompt.messages]
            max_tokens = prompt.max_tokens or max_tokens
        elif self.input_tokens is not None:
            messages = [{"role": "user", "content": synthetic_text(self.input_tokens.draw(rng), rng)}]
        else:
            template = rng.choice(BUILTIN_TEMPLATES)
            messages = [{"role": "user", "content": template.format(i=rng.randrange(1, 10_000))}]
        if self.salted:
            last = messages[-1]
            last["content"] = f"[{rng.getrandbits(48):012x}] " + content_text(last.get("content"))
        if self.system_prompt is not None:
            system: Message = {"role": "system", "content": self.system_prompt}
            if self.cache_control:
                system["cache_control"] = {"type": "ephemeral"}
            messages.insert(0, system)
        return messages, max_tokens

    def body(self, model: str, messages: Sequence[Message], max_tokens: int) -> bytes:
        """The request body of ``messages`` for ``model`` (the same messages go to every fallback model)."""
        return chat_body(model, messages, max_tokens, self.extra_body)
