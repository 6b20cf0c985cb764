"""The simulator's HTTP front (aiohttp): OpenAI-compatible routes around the pure engines of :mod:`.engine`.

One timer per model drives its engine: it wakes when the engine's next token is due, takes every emission due and
writes each token straight to its stream's transport as one HTTP chunk. No coroutine wakes per token.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import resource
import signal
import socket
import time
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from locust_llm.histogram import Histogram
from locust_llm.sim.engine import Emission, PacingEngine, PacingParams, SeqRequest
from locust_llm.sim.tokens import prompt_tokens, token_text

__all__ = ["ModelSpec", "SimConfig", "SimServer", "serve"]

EARLY_NS = 500_000
"""Tokens due within 0.5 ms are written now: asyncio's timers wake up to 1 ms late (epoll's millisecond timeout),
so aiming half a millisecond early centres the emission error on zero."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    params: PacingParams
    context_tokens: int = 32_768

    def truth(self, output_tokens: int) -> dict[str, Any]:
        return {
            "engine": "pacing",
            "saturation_users": self.params.saturation_users,
            "ttft_ms": self.params.ttft_ms,
            "itl_ms": self.params.itl_ms,
            "capacity": self.params.capacity,
            "service_s": self.params.service_s(output_tokens),
        }


@dataclass(frozen=True)
class SimConfig:
    models: tuple[ModelSpec, ...]
    seed: int = 0

    @property
    def default_model(self) -> str:
        return self.models[0].name


def _frame(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk (``Transfer-Encoding: chunked``)."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Stream:
    """One response in flight. Streaming ones write SSE chunks to ``transport``; others collect text."""

    __slots__ = (
        "_head",
        "_tail",
        "completion_id",
        "created",
        "done",
        "include_usage",
        "model",
        "output_tokens",
        "prompt_tokens",
        "seq_id",
        "text",
        "transport",
    )

    def __init__(
        self,
        seq_id: int,
        model: str,
        prompt_tokens: int,
        output_tokens: int,
        transport: asyncio.BaseTransport | None,
        include_usage: bool,
        done: asyncio.Future[None],
    ) -> None:
        self.seq_id = seq_id
        self.model = model
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.transport = transport
        self.include_usage = include_usage
        self.done = done
        self.completion_id = f"chatcmpl-sim{seq_id:012d}"
        self.created = int(time.time())
        self.text: list[str] = []
        role = self._chunk({"role": "assistant", "content": ""}, None)
        marker = b'"content":""'
        cut = role.index(marker) + len(b'"content":')
        # content chunks share the role chunk's bytes around the content value
        self._head = role[:cut].replace(b'"role":"assistant",', b"")
        self._tail = role[cut + 2 :]

    def _chunk(self, delta: dict[str, Any] | None, finish_reason: str | None, usage: Any = None) -> bytes:
        obj: dict[str, Any] = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_locust_llm_sim",
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if self.include_usage:
            obj["usage"] = usage
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    def role_chunk(self) -> bytes:
        return self._chunk({"role": "assistant", "content": ""}, None)

    def content_chunk(self, text: str) -> bytes:
        return self._head + orjson.dumps(text) + self._tail

    def usage(self) -> dict[str, int]:
        n = self.output_tokens
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": n,
            "total_tokens": self.prompt_tokens + n,
        }

    def final_chunks(self, finish_reason: str) -> bytes:
        out = self._chunk({}, finish_reason)
        if self.include_usage:
            out += self._chunk(None, None, self.usage())
        return out + b"data: [DONE]\n\n"


class ModelRuntime:
    """One model: its engine, the streams in flight, and the timer that emits their tokens."""

    def __init__(self, spec: ModelSpec, seed: int, lateness: Histogram) -> None:
        self.spec = spec
        self.seed = seed
        self.engine = PacingEngine(spec.params)
        self.streams: dict[int, Stream] = {}
        self.lateness = lateness
        self.tokens_emitted = 0
        self._handle: asyncio.TimerHandle | None = None
        self._handle_ns: int | None = None

    def submit(self, stream: Stream) -> None:
        self.streams[stream.seq_id] = stream
        seq = SeqRequest(stream.seq_id, stream.prompt_tokens, stream.output_tokens)
        self.engine.submit(seq, time.monotonic_ns())
        self._reschedule()

    def _reschedule(self) -> None:
        due = self.engine.next_event_ns()
        if due is None:
            return
        if self._handle is not None and self._handle_ns is not None and self._handle_ns <= due:
            return
        if self._handle is not None:
            self._handle.cancel()
        loop = asyncio.get_running_loop()
        self._handle_ns = due
        self._handle = loop.call_at((due - EARLY_NS) / 1e9, self._fire)

    def _fire(self) -> None:
        self._handle = self._handle_ns = None
        for emission in self.engine.advance(time.monotonic_ns() + EARLY_NS):
            self._emit(emission)
        self._reschedule()

    def _emit(self, emission: Emission) -> None:
        stream = self.streams.get(emission.seq_id)
        if stream is None:
            return
        text = token_text(self.seed, emission.seq_id, emission.index)
        transport = stream.transport
        if transport is None:
            stream.text.append(text)
        elif transport.is_closing():
            self._drop(stream)
            return
        else:
            payload = stream.content_chunk(text)
            if emission.last:
                payload += stream.final_chunks("length")
            transport.write(_frame(payload))  # type: ignore[attr-defined]
        self.lateness.record(max(0, time.monotonic_ns() - emission.at_ns))
        self.tokens_emitted += 1
        if emission.last:
            del self.streams[emission.seq_id]
            if not stream.done.done():
                stream.done.set_result(None)

    def _drop(self, stream: Stream) -> None:
        self.engine.cancel(stream.seq_id, time.monotonic_ns())
        del self.streams[stream.seq_id]
        if not stream.done.done():
            stream.done.set_result(None)

    def stats(self) -> dict[str, Any]:
        engine = self.engine
        return {
            "admitted": engine.admitted,
            "queued": engine.queued,
            "finished": engine.finished,
            "cancelled": engine.cancelled,
            "running": engine.running,
            "waiting": engine.waiting,
            "tokens_emitted": self.tokens_emitted,
        }


def _error(status: int, message: str, err_type: str, code: str | None = None, param: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": err_type, "param": param, "code": code}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.param = param
        self.status = status
        self.code = code

    def response(self) -> web.Response:
        err_type = "invalid_request_error"
        return _error(self.status, str(self), err_type, self.code, self.param)


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    max_tokens: int
    stream: bool
    include_usage: bool


class SimServer:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.lateness = Histogram()
        self.models = {spec.name: ModelRuntime(spec, config.seed, self.lateness) for spec in config.models}
        self.requests_by_status: dict[str, int] = {}
        self._seq = itertools.count(1)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/sim/stats", self.sim_stats)
        return app

    def _count(self, status: int) -> None:
        key = str(status)
        self.requests_by_status[key] = self.requests_by_status.get(key, 0) + 1

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        try:
            chat = self._parse(await request.read())
        except BadRequest as exc:
            self._count(exc.status)
            return exc.response()
        self._count(200)
        runtime = self.models[chat.model]
        loop = asyncio.get_running_loop()
        seq_id = next(self._seq)
        n_prompt = prompt_tokens(chat.messages)
        if not chat.stream:
            stream = Stream(seq_id, chat.model, n_prompt, chat.max_tokens, None, True, loop.create_future())
            runtime.submit(stream)
            await stream.done
            return web.Response(body=orjson.dumps(self._completion(stream)), content_type="application/json")
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
        )
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        stream = Stream(
            seq_id,
            chat.model,
            n_prompt,
            chat.max_tokens,
            request.transport,
            chat.include_usage,
            loop.create_future(),
        )
        await resp.write(stream.role_chunk())
        runtime.submit(stream)
        await stream.done
        if request.transport is not None and not request.transport.is_closing():
            await resp.write_eof()
        return resp

    def _parse(self, raw: bytes) -> ChatRequest:
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise BadRequest("We could not parse the JSON body of your request.") from None
        if not isinstance(body, dict):
            raise BadRequest("The request body must be a JSON object.")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("'messages' is a required property and must be a non-empty array of objects.", "messages")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise BadRequest("'model' is a required property.", "model")
        if model not in self.models:
            raise BadRequest(
                f"The model '{model}' does not exist or you do not have access to it.",
                "model",
                404,
                "model_not_found",
            )
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens", 16))
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise BadRequest(f"Invalid 'max_tokens': must be an integer >= 1, got {max_tokens!r}.", "max_tokens")
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise BadRequest("Invalid 'stream': must be a boolean.", "stream")
        options = body.get("stream_options") or {}
        include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
        context = self.models[model].spec.context_tokens
        if prompt_tokens(messages) + max_tokens > context:
            raise BadRequest(
                f"This model's maximum context length is {context} tokens. However, you requested "
                f"{prompt_tokens(messages) + max_tokens} tokens. Please reduce the length of the messages.",
                "messages",
                400,
                "context_length_exceeded",
            )
        return ChatRequest(model, messages, max_tokens, stream, include_usage)

    def _completion(self, stream: Stream) -> dict[str, Any]:
        return {
            "id": stream.completion_id,
            "object": "chat.completion",
            "created": stream.created,
            "model": stream.model,
            "system_fingerprint": "fp_locust_llm_sim",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(stream.text)},
                    "logprobs": None,
                    "finish_reason": "length",
                }
            ],
            "usage": stream.usage(),
        }

    async def list_models(self, request: web.Request) -> web.Response:
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "locust-llm-sim"} for name in self.models]
        return web.json_response({"object": "list", "data": data})

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def sim_stats(self, request: web.Request) -> web.Response:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        body = {
            "models": {name: rt.stats() for name, rt in self.models.items()},
            "truth": {name: rt.spec.truth(128) for name, rt in self.models.items()},
            "requests_by_status": self.requests_by_status,
            "lateness_ms": {
                "count": self.lateness.count,
                "p50": self.lateness.quantile(0.5) / 1e6,
                "p99": self.lateness.quantile(0.99) / 1e6,
                "max": self.lateness.max / 1e6,
            },
            "cpu_s": usage.ru_utime + usage.ru_stime,
        }
        return web.json_response(body)


async def serve(config: SimConfig, host: str, port: int, parent_pid: int | None = None, ready_fd: int = 1) -> None:
    """Serve until SIGINT/SIGTERM, or until the parent process ``parent_pid`` has gone.

    Prints ``locust-llm sim listening on http://HOST:PORT/v1`` (one line) once it accepts connections.
    """
    server = SimServer(config)
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False)
    await runner.setup()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    site = web.SockSite(runner, sock)
    await site.start()
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    os.write(ready_fd, f"locust-llm sim listening on http://{shown}:{bound}/v1\n".encode())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        while not stop.is_set():
            if parent_pid is not None and os.getppid() != parent_pid:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
    finally:
        await runner.cleanup()
