"""Conversations (``--turns``): each user holds one at a time, and each turn resends the whole history. Pure.

A conversation is planned when it starts:

- its **file prompt** (with ``--prompts``) is drawn; a multi-turn one (JSONL ``turns``, a ShareGPT conversation
  with several human turns) gives the user messages of its turns, in order;
- its **length**: ``--turns N`` or ``MIN:MAX`` (uniform), capped by a file conversation's own turns; with
  ``--turns auto`` (the default) a file conversation's own turns, else one;
- its **history** starts with ``--system-prompt`` (once, marked ``cache_control`` with ``--cache-control on``),
  then the file prompt's own leading messages.

Turn ``k`` sends ``history + [user message k]`` where the user message is the file conversation's ``k``-th
(beyond its turns, or without one, a new message from the source as a single request would draw it). Only the
first user message is salted (``--salt``): later turns must share the history's prefix, as a real conversation
does. When the answer came, the user message and the assistant's reply (its streamed text, exactly) join the
history. A turn whose estimated prompt plus ``max_tokens`` would pass ``--max-context-tokens`` is not sent: the
conversation ends there and a new one starts (whose first turn is sent whatever its size, so a user never spins).
A failed turn ends its conversation (its history would lack the answer).
"""

from __future__ import annotations

import random
from typing import Any

from locust_llm.tokens import estimate_prompt_tokens
from locust_llm.workload.prompts import Workload

__all__ = ["Conversation"]

Message = dict[str, Any]


class Conversation:
    """One user's conversation (module docstring): :meth:`next_turn`, then :meth:`answered` or :meth:`end`."""

    __slots__ = ("_pending", "history", "max_tokens", "planned", "script", "turn", "workload")

    def __init__(self, workload: Workload, rng: random.Random) -> None:
        self.workload = workload
        prompt = rng.choice(workload.prompts) if workload.prompts else None
        self.script: tuple[str, ...] = prompt.user_turns if prompt is not None else ()
        self.max_tokens = prompt.max_tokens if prompt is not None else None
        own = len(prompt.turns) if prompt is not None and prompt.turns else 0
        if workload.turns is None:
            self.planned = own or 1
        else:
            drawn = workload.turns.draw(rng)
            self.planned = min(drawn, own) if own else drawn
        head = () if prompt is None else (prompt.system if prompt.turns else prompt.messages[:-1])
        self.history: list[Message] = [*workload.system_messages(), *(dict(m) for m in head)]
        self.turn = 0
        self._pending: Message | None = None

    @property
    def finished(self) -> bool:
        return self.turn >= self.planned

    def next_turn(self, rng: random.Random) -> tuple[list[Message], int] | None:
        """The messages and ``max_tokens`` of the next turn, or None when it would pass ``--max-context-tokens``
        (the conversation is then finished)."""
        index = self.turn
        text = self.script[index] if index < len(self.script) else self.workload.fresh_text(rng)
        if index == 0 and self.workload.salted:
            text = self.workload.salted_text(text, rng)
        max_tokens = self.max_tokens or self.workload.max_tokens.draw(rng)
        user: Message = {"role": "user", "content": text}
        messages = [*self.history, user]
        limit = self.workload.max_context_tokens
        if index > 0 and limit is not None and estimate_prompt_tokens(messages) + max_tokens > limit:
            self.end()
            return None
        self.turn = index + 1
        self._pending = user
        return messages, max_tokens

    def answered(self, reply: str) -> None:
        """The turn succeeded with ``reply``: the user message and the reply join the history."""
        if self._pending is not None:
            self.history += [self._pending, {"role": "assistant", "content": reply}]
            self._pending = None

    def end(self) -> None:
        """End the conversation now (a failed turn, or the context limit)."""
        self.planned = self.turn
        self._pending = None
