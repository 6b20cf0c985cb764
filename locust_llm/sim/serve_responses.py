"""The simulator's Responses API: a request in chat form, and the API's events (each token's numbered). Pure."""

from __future__ import annotations

import time
from typing import Any

import orjson

from locust_llm.sim.request import BadRequest

__all__ = ["ResponsesFormat", "as_chat"]


def as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The request as a chat completion: ``instructions`` and ``input`` (a string or messages) as messages."""
    given = body.get("input")
    if isinstance(given, str):
        messages: list[Any] = [{"role": "user", "content": given}]
    elif isinstance(given, list) and given:
        messages = [_message(item) for item in given]
    else:
        raise BadRequest("'input' is a required property: a string or a non-empty array of messages.", "input")
    if isinstance(body.get("instructions"), str):
        messages.insert(0, {"role": "system", "content": body["instructions"]})
    if "previous_response_id" in body:
        raise BadRequest("This simulator does not keep responses: 'previous_response_id' is not supported.")
    chat: dict[str, Any] = {k: body[k] for k in ("model", "stream", "min_tokens", "ignore_eos") if k in body}
    chat["messages"] = messages
    if "max_output_tokens" in body:
        chat["max_tokens"] = body["max_output_tokens"]
    chat["stream_options"] = {"include_usage": True}
    return chat


def _message(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict) or "role" not in item:
        raise BadRequest("Each 'input' item must be a message with a 'role' and 'content'.", "input")
    return {"role": item["role"], "content": item.get("content", "")}


def _event(obj: dict[str, Any]) -> bytes:
    kind: str = obj["type"]
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


class ResponsesFormat:
    """The events of one response (``resp_sim{seq_id}``), with :class:`~locust_llm.sim.chunks.ChunkFormat`'s
    interface; ``numbered``: a token's event ends with ``sequence_number`` (:data:`FIRST_DELTA` + its index)."""

    FIRST_DELTA = 3
    numbered = True
    __slots__ = ("created", "head", "item_id", "model", "reasoning_head", "response_id", "tail")

    def __init__(self, seq_id: int, model: str, include_usage: bool = True, prompt_tokens: int = 0) -> None:
        self.response_id = f"resp_sim{seq_id:012d}"
        self.item_id = f"msg_sim{seq_id:012d}"
        self.created = int(time.time())
        self.model = model
        self.head = self._delta_head("response.output_text.delta")
        self.reasoning_head = self._delta_head("response.reasoning_text.delta")
        self.tail = b',"sequence_number":'

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
        item = {"id": self.item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        return (
            _event({"type": "response.created", "sequence_number": 0, "response": self._response("in_progress")})
            + _event({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item})
            + _event(
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
        status = "incomplete" if finish_reason == "length" else "completed"
        number = self.FIRST_DELTA + completion_tokens
        return _event(
            {"type": f"response.{status}", "sequence_number": number, "response": self._response(status, usage)}
        )
