"""The simulator's Messages API: a request in chat form (``anthropic-version`` required, tool blocks as chat's
tool messages), and Anthropic's events. Pure."""

from __future__ import annotations

import time
from typing import Any

import orjson

from locust_llm.protocol.tokens import content_text
from locust_llm.sim.chunks import named_event, tool_call_id
from locust_llm.sim.request import BadRequest

__all__ = ["MessagesFormat", "as_chat"]


def as_chat(body: dict[str, Any], version: str | None) -> dict[str, Any]:
    """The request as a chat completion: ``system`` (a string or text blocks) first. Raises :class:`BadRequest`."""
    if not version:
        raise BadRequest("anthropic-version: header is required", "anthropic-version")
    if not isinstance(body.get("max_tokens"), int):
        raise BadRequest("max_tokens: Field required", "max_tokens")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise BadRequest("messages: Field required", "messages")
    system = body.get("system")
    if isinstance(system, list):  # blocks: marked ones stay marked, for --prefix-cache hint
        marked = [b for b in system if isinstance(b, dict) and "cache_control" in b]
        head: dict[str, Any] = {"role": "system", "content": content_text(system)}
        if marked:
            head["cache_control"] = marked[0]["cache_control"]
        messages = [head, *messages]
    elif isinstance(system, str):
        messages = [{"role": "system", "content": system}, *messages]
    chat: dict[str, Any] = {
        k: body[k] for k in ("model", "stream", "max_tokens", "min_tokens", "ignore_eos") if k in body
    }
    chat["messages"] = [m for message in messages for m in _chat_messages(message)]
    if body.get("tools"):
        tools = body["tools"]
        if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools
        ):
            raise BadRequest("tools: each must be an object with a 'name' and an 'input_schema'", "tools")
        chat["tools"] = [{"type": "function", "function": {"name": t["name"]}} for t in tools]
        choice = body.get("tool_choice") or {}
        kind = choice.get("type") if isinstance(choice, dict) else None
        named = {"type": "function", "function": {"name": choice.get("name")}} if kind == "tool" else None
        chat["tool_choice"] = named or ("required" if kind == "any" else "auto")
    chat["stream_options"] = {"include_usage": True}
    return chat


def _chat_messages(message: Any) -> list[dict[str, Any]]:
    """A Messages API message in chat's form: ``tool_use`` blocks as the assistant's tool calls, ``tool_result``
    blocks as tool messages, text blocks as its content."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return [message]
    uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    if not uses and not results:
        return [message]
    text = content_text([b for b in content if isinstance(b, dict) and b.get("type") == "text"])
    out: list[dict[str, Any]] = []
    if uses:
        calls = []
        for block in uses:
            arguments = orjson.dumps(block.get("input", {})).decode()
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name"), "arguments": arguments},
                }
            )
        out.append({"role": "assistant", "content": text or None, "tool_calls": calls})
    for block in results:
        out.append(
            {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": content_text(block.get("content"))}
        )
    return out


class MessagesFormat:
    """The events of one message (``msg_sim{seq_id}``), with :class:`~locust_llm.sim.chunks.ChunkFormat`'s
    interface; ``message_start`` states ``prompt_tokens``."""

    numbered = False
    __slots__ = ("created", "head", "message_id", "model", "prompt_tokens", "reasoning_head", "tail", "tool")

    def __init__(
        self, seq_id: int, model: str, include_usage: bool = True, prompt_tokens: int = 0, tool: str | None = None
    ) -> None:
        self.message_id = f"msg_sim{seq_id:012d}"
        self.created = int(time.time())
        self.model = model
        self.prompt_tokens = prompt_tokens
        delta = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
        self.tool = tool
        self.head = delta + (b'{"type":"input_json_delta","partial_json":' if tool else b'{"type":"text_delta","text":')
        self.reasoning_head = delta + b'{"type":"thinking_delta","thinking":'
        self.tail = b"}}\n\n"

    def role_chunk(self) -> bytes:
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self.model,
            "stop_reason": None,
            "usage": {"input_tokens": self.prompt_tokens, "cache_read_input_tokens": 0, "output_tokens": 1},
        }
        block: dict[str, Any] = {"type": "text", "text": ""}
        if self.tool is not None:
            block = {"type": "tool_use", "id": tool_call_id(self.message_id), "name": self.tool, "input": {}}
        return named_event({"type": "message_start", "message": message}) + named_event(
            {"type": "content_block_start", "index": 0, "content_block": block}
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
        """The block's end, ``message_delta`` with the usage and, unless ``done`` is False, ``message_stop``."""
        usage = {
            "input_tokens": prompt_tokens - cached_tokens,
            "cache_read_input_tokens": cached_tokens,
            "output_tokens": completion_tokens,
        }
        reason = "tool_use" if self.tool is not None else "max_tokens" if finish_reason == "length" else "end_turn"
        out = named_event({"type": "content_block_stop", "index": 0}) + named_event(
            {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None}, "usage": usage}
        )
        return out + named_event({"type": "message_stop"}) if done else out
