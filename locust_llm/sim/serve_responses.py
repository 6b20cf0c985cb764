"""The simulator's Responses API: a request in chat form (with a kept response's history), and the API's events
(each token's numbered). Pure."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from locust_llm.sim.chunks import named_event, tool_call_id
from locust_llm.sim.request import BadRequest

__all__ = ["ResponsesFormat", "as_chat"]


def as_chat(body: dict[str, Any], stored: Callable[[str], list[Any] | None] = lambda _id: None) -> dict[str, Any]:
    """The request as a chat completion: ``instructions``, the history of ``previous_response_id`` (``stored``: the
    messages and answer of a kept response) and ``input`` (a string or messages) as messages."""
    given = body.get("input")
    if isinstance(given, str):
        messages: list[Any] = [{"role": "user", "content": given}]
    elif isinstance(given, list) and given:
        messages = [_message(item) for item in given]
    else:
        raise BadRequest("'input' is a required property: a string or a non-empty array of messages.", "input")
    previous = body.get("previous_response_id")
    if previous is not None:
        history = stored(previous) if isinstance(previous, str) else None
        if history is None:
            raise BadRequest(f"Previous response with id '{previous}' not found.", "previous_response_id")
        messages = [*history, *messages]
    if isinstance(body.get("instructions"), str):
        messages.insert(0, {"role": "system", "content": body["instructions"]})
    chat: dict[str, Any] = {k: body[k] for k in ("model", "stream", "min_tokens", "ignore_eos") if k in body}
    chat["messages"] = messages
    if body.get("tools"):
        chat["tools"] = [_function(t) for t in body["tools"]]
        chat["tool_choice"] = body.get("tool_choice", "auto")
    if "max_output_tokens" in body:
        chat["max_tokens"] = body["max_output_tokens"]
    chat["stream_options"] = {"include_usage": True}
    return chat


def _message(item: Any) -> dict[str, Any]:
    """An input item as a chat message: a message, a ``function_call`` (the assistant's) or its output."""
    kind = item.get("type") if isinstance(item, dict) else None
    if kind == "function_call":
        call = {"id": item.get("call_id"), "type": "function"}
        function = {"name": item.get("name"), "arguments": item.get("arguments", "")}
        return {"role": "assistant", "content": None, "tool_calls": [{**call, "function": function}]}
    if kind == "function_call_output":
        return {"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output", "")}
    if not isinstance(item, dict) or "role" not in item:
        raise BadRequest("Each 'input' item must be a message with a 'role' and 'content'.", "input")
    return {"role": item["role"], "content": item.get("content", "")}


def _function(tool: Any) -> dict[str, Any]:
    """A Responses API tool (``{"type": "function", "name", "parameters"}``) in chat's form."""
    if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("name"), str):
        raise BadRequest("Each tool must be {'type': 'function', 'name': ..., 'parameters': ...}.", "tools")
    return {"type": "function", "function": {"name": tool["name"], "parameters": tool.get("parameters", {})}}


class ResponsesFormat:
    """The events of one response (``resp_sim{seq_id}``), with :class:`~locust_llm.sim.chunks.ChunkFormat`'s
    interface; ``numbered``: a token's event ends with ``sequence_number`` (:data:`FIRST_DELTA` + its index)."""

    numbered = True
    __slots__ = ("FIRST_DELTA", "created", "head", "item_id", "model", "reasoning_head", "response_id", "tail", "tool")

    def __init__(
        self, seq_id: int, model: str, include_usage: bool = True, prompt_tokens: int = 0, tool: str | None = None
    ) -> None:
        self.response_id = f"resp_sim{seq_id:012d}"
        self.tool = tool
        self.item_id = f"{'fc' if tool else 'msg'}_sim{seq_id:012d}"
        self.created = int(time.time())
        self.model = model
        self.head = self._delta_head("response.output_text.delta")
        if tool is not None:
            kind = "response.function_call_arguments.delta"
            self.head = (
                f'event: {kind}\ndata: {{"type":"{kind}","item_id":"{self.item_id}","output_index":0,"delta":'
            ).encode()
        self.reasoning_head = self._delta_head("response.reasoning_text.delta")
        self.tail = b',"sequence_number":'
        self.FIRST_DELTA = 2 if tool is not None else 3
        """The ``sequence_number`` of the first token's event (the opening events come before it)."""

    def _delta_head(self, kind: str) -> bytes:
        return (
            f'event: {kind}\ndata: {{"type":"{kind}","item_id":"{self.item_id}","output_index":0,'
            f'"content_index":0,"delta":'
        ).encode()

    def _response(self, status: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "model": self.model,
            "output": [],
            "usage": usage,
        }

    def role_chunk(self) -> bytes:
        if self.tool is not None:  # a function call: its item names the tool, its arguments follow as deltas
            call = {"id": self.item_id, "type": "function_call", "status": "in_progress", "arguments": ""}
            call |= {"call_id": tool_call_id(self.response_id), "name": self.tool}
            return named_event(
                {"type": "response.created", "sequence_number": 0, "response": self._response("in_progress")}
            ) + named_event(
                {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": call}
            )
        item = {"id": self.item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        return (
            named_event({"type": "response.created", "sequence_number": 0, "response": self._response("in_progress")})
            + named_event({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item})
            + named_event(
                {
                    "type": "response.content_part.added",
                    "sequence_number": 2,
                    "item_id": self.item_id,
                    "output_index": 0,
                    "content_index": 0,
                    "part": part,
                }
            )
        )

    def final_chunks(
        self,
        finish_reason: str,
        prompt_tokens: int,
        completion_tokens: int,
        done: bool = True,
        cached_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> bytes:
        """The end event with the usage; none unless ``done`` (a stream cut before its end)."""
        if not done:
            return b""
        usage = {
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": completion_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": prompt_tokens + completion_tokens,
        }
        status = "incomplete" if finish_reason == "length" and self.tool is None else "completed"
        number = self.FIRST_DELTA + completion_tokens
        return named_event(
            {"type": f"response.{status}", "sequence_number": number, "response": self._response(status, usage)}
        )
