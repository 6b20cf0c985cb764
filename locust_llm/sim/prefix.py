"""The simulator's prefix cache: which leading messages are cacheable, and an LRU cache of their KV. Pure.

Cacheable: up to the last message marked ``cache_control``; in ``auto`` mode also a leading system message or a
conversation's history; ``hint`` marked prefixes only; ``off`` none. Keys are chained message by message, so every
message boundary has one. A lookup hits within ``ttl_s`` of its last use; beyond ``capacity_tokens`` the least
recently used go.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import orjson

__all__ = ["PrefixCache", "cache_prefix", "chain_keys", "next_key", "prefix_key"]

Message = dict[str, Any]


def cache_prefix(messages: Sequence[Message], mode: str = "auto") -> list[Message]:
    """The cacheable leading messages of a request (module docstring)."""
    if mode == "off":
        return []
    marked = [i for i, m in enumerate(messages) if isinstance(m.get("cache_control"), dict) or _part_marked(m)]
    if marked:
        return list(messages[: marked[-1] + 1])
    if mode == "auto" and messages and messages[0].get("role") in ("system", "developer") and len(messages) > 1:
        return list(messages[:1])
    return []


def _part_marked(message: Message) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(p, dict) and "cache_control" in p for p in content)


def next_key(previous: str, message: Message) -> str:
    """The key of a prefix extended by ``message``: BLAKE2b (12 bytes, hex) of the previous key and its JSON."""
    return hashlib.blake2b(previous.encode() + orjson.dumps(message), digest_size=12).hexdigest()


def chain_keys(messages: Sequence[Message]) -> list[str]:
    """The key of every leading part of ``messages``: ``keys[j]`` identifies ``messages[:j + 1]``."""
    keys: list[str] = []
    key = ""
    for message in messages:
        key = next_key(key, message)
        keys.append(key)
    return keys


def prefix_key(prefix: Sequence[Message]) -> str:
    """A stable identifier of a (non-empty) prefix: the last of its :func:`chain_keys`."""
    return chain_keys(prefix)[-1]


class PrefixCache:
    def __init__(self, capacity_tokens: int, ttl_s: float) -> None:
        self.capacity_tokens = capacity_tokens
        self.ttl_ns = int(ttl_s * 1e9)
        self._entries: OrderedDict[str, tuple[int, int]] = OrderedDict()  # key -> (tokens, last_used_ns)
        self.tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: str, now_ns: int) -> bool:
        entry = self._entries.get(key)
        if entry is None:
            return False
        tokens, last_used = entry
        if now_ns - last_used > self.ttl_ns:
            self._remove(key)
            return False
        self._entries[key] = (tokens, now_ns)
        self._entries.move_to_end(key)
        return True

    def insert(self, key: str, tokens: int, now_ns: int) -> None:
        if tokens > self.capacity_tokens:
            return
        if key in self._entries:
            self._remove(key)
        while self._entries and self.tokens + tokens > self.capacity_tokens:
            self._remove(next(iter(self._entries)))
        self._entries[key] = (tokens, now_ns)
        self.tokens += tokens

    def _remove(self, key: str) -> None:
        tokens, _ = self._entries.pop(key)
        self.tokens -= tokens
