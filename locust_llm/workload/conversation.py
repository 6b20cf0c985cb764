"""Conversations (``--turns``): each user holds one at a time, and each turn resends the whole history. Pure.

A conversation's prompt, length (``--turns N`` or ``MIN:MAX``) and history are drawn when it starts. Turn ``k``
sends ``history + [user message k]`` (``--conversation-state server``: the new message and the last answer's id);
the answer's exact text joins the history; an answer that called tools is followed by their results. Only the first
message is salted. A failed turn, or one past ``--max-context-tokens``, ends the conversation.
"""

from __future__ import annotations

import random
from typing import Any

from locust_llm.protocol.tokens import estimate_prompt_tokens
from locust_llm.workload.prompts import Workload, synthetic_text

__all__ = ["Conversation"]

Message = dict[str, Any]


class Conversation:
    """One user's conversation (module docstring): :meth:`next_turn`, then :meth:`answered` or :meth:`end`."""

    __slots__ = (
        "_pending",
        "_results",
        "_said",
        "history",
        "max_tokens",
        "planned",
        "previous",
        "script",
        "turn",
        "workload",
    )

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
        self._said = 0  # user messages sent (a tool result's turn sends none)
        self._pending: list[Message] = []  # what this turn sent after the history
        self._results: list[Message] = []  # the tool results the next turn sends back
        self.previous: tuple[str, str] | None = None
        """(model, response id) of the last answer, when the server keeps it (``--conversation-state server``)."""

    @property
    def finished(self) -> bool:
        return self.turn >= self.planned

    def next_turn(self, rng: random.Random) -> tuple[list[Message], int] | None:
        """The messages and ``max_tokens`` of the next turn, or None when it would pass ``--max-context-tokens``
        (the conversation is then finished)."""
        index = self.turn
        max_tokens = self.max_tokens or self.workload.max_tokens.draw(rng)
        if self._results:  # the last answer called tools: this turn sends their results back
            new = self._results
        else:
            said = self._said
            text = self.script[said] if said < len(self.script) else self.workload.fresh_text(rng)
            if said == 0 and self.workload.salted:
                text = self.workload.salted_text(text, rng)
            new = [{"role": "user", "content": text}]
        messages = [*self.history, *new]
        limit = self.workload.max_context_tokens
        if index > 0 and limit is not None and estimate_prompt_tokens(messages) + max_tokens > limit:
            self.end()
            return None
        self.turn = index + 1
        self._said += not self._results
        self._pending, self._results = new, []
        return messages, max_tokens

    @property
    def new_messages(self) -> int:
        """How many messages at the end of the current turn's are new (the rest is the history)."""
        return len(self._pending)

    def answered(
        self,
        reply: str,
        model: str = "",
        response_id: str | None = None,
        tools: list[dict[str, str]] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """The turn succeeded with ``reply`` (from ``model``, which keeps it as ``response_id`` if it says so) and
        the ``tools`` it called: what the turn sent and the answer join the history, and a result of
        ``--tool-result-tokens`` for each call (drawn with ``rng``) waits for the next turn."""
        answer: Message = {"role": "assistant", "content": reply}
        if tools:
            answer["tool_calls"] = [
                {"id": t["id"], "type": "function", "function": {"name": t["name"], "arguments": t["arguments"]}}
                for t in tools
            ]
            draw = rng or random.Random(0)
            size = self.workload.tool_result_tokens
            self._results = [
                {"role": "tool", "tool_call_id": t["id"], "content": synthetic_text(size, draw)} for t in tools
            ]
        self.history += [*self._pending, answer]
        self._pending = []
        self.previous = (model, response_id) if response_id else None

    def end(self) -> None:
        """End the conversation now (a failed turn, or the context limit)."""
        self.planned = self.turn
        self._pending, self._results = [], []
        self.previous = None
