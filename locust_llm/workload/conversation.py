"""Conversations (``--turns``): each user holds one at a time, and each turn resends the whole history. Pure.

A conversation's file prompt, length (``--turns N`` or ``MIN:MAX``, capped by the file's; ``auto``: the file's own,
else one) and history (``--system-prompt``, then the file's leading messages) are drawn when it starts. Turn ``k``
sends ``history + [user message k]``, and the answer's exact text joins the history. Only the first message is
salted. A failed turn, or one that would pass ``--max-context-tokens``, ends the conversation.
"""

from __future__ import annotations

import random
from typing import Any

from locust_llm.protocol.tokens import estimate_prompt_tokens
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
