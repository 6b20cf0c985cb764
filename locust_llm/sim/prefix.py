"""Prefix cache of the simulator: prompt prefixes whose KV is kept after their prefill. Pure.

An entry is a prefix key (a hash of the messages it covers) with its token count. A lookup hits when the key is
present and was used within ``ttl_s`` (like an "ephemeral" cache entry); a hit refreshes it. Inserting beyond
``capacity_tokens`` evicts the least recently used entries.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["PrefixCache"]


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
