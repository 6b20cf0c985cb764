"""The simulator's HTTP front (aiohttp): OpenAI-compatible routes around the pure engines, limits and faults.

One timer per engine replica drives it: it wakes when the engine's next step ends, takes every emission due and
writes each token straight to its stream's transport as one HTTP chunk. No coroutine wakes per token.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import random
import resource
import signal
import socket
import struct
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from aiohttp import web

from locust_llm.histogram import Histogram
from locust_llm.sim.batching import BatchingEngine
from locust_llm.sim.config import ModelSpec, SimConfig
from locust_llm.sim.engine import Emission, PacingEngine, SeqRequest
from locust_llm.sim.faults import MID_STREAM
from locust_llm.sim.limits import RateLimiter
from locust_llm.sim.tokens import TOKEN_JSON, prompt_tokens, token_text
from locust_llm.sim.truth import saturation_users, steady_state

__all__ = ["REFERENCE_WORKLOAD", "SimServer", "serve"]

EARLY_NS = 500_000
"""Tokens due within 0.5 ms are written now: asyncio's timers wake up to 1 ms late (epoll's millisecond timeout),
so aiming half a millisecond early centres the emission error on zero."""

LATE_NS = 5_000_000
"""A token written more than 5 ms after it was due counts as late (see :class:`BehindWatch`)."""

REFERENCE_WORKLOAD = {"prompt_tokens": 30, "max_tokens": 128}
"""The workload of the truth shown in ``/sim/stats``: about the built-in prompts with the default --max-tokens."""


def _frame(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk (``Transfer-Encoding: chunked``)."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Stream:
    """One response in flight. Streaming ones write SSE chunks to ``transport``; others collect text."""

    __slots__ = (
        "completion_id",
        "created",
        "done",
        "fault",
        "fault_at",
        "head",
        "include_usage",
        "key",
        "model",
        "output_tokens",
        "prompt_tokens",
        "seq_id",
        "tail",
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
        key: str = "",
        fault: str | None = None,
    ) -> None:
        self.seq_id = seq_id
        self.model = model
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.transport = transport
        self.include_usage = include_usage
        self.done = done
        self.key = key
        self.fault = fault
        self.fault_at = output_tokens // 2
        self.completion_id = f"chatcmpl-sim{seq_id:012d}"
        self.created = int(time.time())
        self.text: list[str] = []
        role = self._chunk({"role": "assistant", "content": ""}, None)
        cut = role.index(b'"content":""') + len(b'"content":')
        # content chunks share the role chunk's bytes around the content value
        self.head = role[:cut].replace(b'"role":"assistant",', b"")
        self.tail = role[cut + 2 :]

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

    def usage(self) -> dict[str, int]:
        n = self.output_tokens
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": n, "total_tokens": self.prompt_tokens + n}

    def final_chunks(self, finish_reason: str) -> bytes:
        out = self._chunk({}, finish_reason)
        if self.fault == "no-done":
            return out
        if self.include_usage:
            out += self._chunk(None, None, self.usage())
        return out + b"data: [DONE]\n\n"

    def finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


class Replica:
    """One engine and the timer that emits its tokens."""

    def __init__(self, runtime: ModelRuntime, engine: PacingEngine | BatchingEngine) -> None:
        self.runtime = runtime
        self.engine = engine
        self.streams: dict[int, Stream] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._handle_ns: int | None = None

    @property
    def load(self) -> int:
        return self.engine.running + self.engine.waiting

    def submit(self, stream: Stream, seq: SeqRequest) -> None:
        self.streams[stream.seq_id] = stream
        self.engine.submit(seq, time.monotonic_ns())
        self._reschedule()

    def cancel(self, stream: Stream) -> None:
        if self.streams.pop(stream.seq_id, None) is not None:
            self.engine.cancel(stream.seq_id, time.monotonic_ns())
            self.runtime.release(stream)
            self._reschedule()

    def _reschedule(self) -> None:
        due = self.engine.next_event_ns()
        if due is None:
            return
        if self._handle is not None and self._handle_ns is not None and self._handle_ns <= due:
            return
        if self._handle is not None:
            self._handle.cancel()
        self._handle_ns = due
        self._handle = asyncio.get_running_loop().call_at((due - EARLY_NS) / 1e9, self._fire)

    def _fire(self) -> None:
        self._handle = self._handle_ns = None
        emissions = self.engine.advance(time.monotonic_ns() + EARLY_NS)
        if emissions:
            self._write(emissions)
        self._reschedule()

    def _write(self, emissions: list[Emission]) -> None:
        """Write every emitted token to its stream: the simulator's hot path, kept to plain local operations."""
        streams = self.streams
        runtime = self.runtime
        seed = runtime.seed
        record = runtime.lateness.record
        clock = time.monotonic_ns
        n_words = len(TOKEN_JSON)
        written = late = 0
        for seq_id, index, at_ns, last in emissions:
            stream = streams.get(seq_id)
            if stream is None:
                continue
            transport = stream.transport
            if transport is None:
                stream.text.append(token_text(seed, seq_id, index))
            elif transport.is_closing():
                self.cancel(stream)
                stream.finish()
                continue
            elif stream.fault is not None and index == stream.fault_at and stream.fault in MID_STREAM:
                self._inject(stream, transport)
                continue
            else:
                word = TOKEN_JSON[(seed * 7919 + seq_id * 2_654_435_761 + index * 40_503) % n_words]
                payload = stream.head + word + stream.tail
                if last:
                    payload += stream.final_chunks("length")
                transport.write(b"%x\r\n%b\r\n" % (len(payload), payload))  # type: ignore[attr-defined]
            lateness = clock() - at_ns
            record(lateness)
            if lateness > LATE_NS:
                late += 1
            written += 1
            if last:
                del streams[seq_id]
                runtime.release(stream)
                stream.finish()
        runtime.tokens_emitted += written
        runtime.late_tokens += late

    def _inject(self, stream: Stream, transport: asyncio.BaseTransport) -> None:
        """A mid-stream fault at token ``fault_at`` (see :mod:`.faults`)."""
        fault = stream.fault
        if fault == "malformed":
            transport.write(_frame(b'data: {"choices": [{"index": 0, "delta": {"content": "\n\n'))  # type: ignore[attr-defined]
            stream.fault = None
            return
        self.cancel(stream)
        if fault == "reset":
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()  # type: ignore[attr-defined]
            stream.finish()
        elif fault == "stall":
            asyncio.get_running_loop().call_later(self.runtime.stall_s, _end_stall, transport, stream)


def _end_stall(transport: asyncio.BaseTransport, stream: Stream) -> None:
    transport.close()
    stream.finish()


class ModelRuntime:
    """One model: its replicas, its rate limiter and its counters."""

    def __init__(self, spec: ModelSpec, config: SimConfig, lateness: Histogram) -> None:
        self.spec = spec
        self.seed = config.seed
        self.stall_s = config.stall_s
        self.lateness = lateness
        self.limiter = RateLimiter(spec.limits)
        self.replicas = [Replica(self, self._engine()) for _ in range(spec.replicas)]
        self.tokens_emitted = 0
        self.late_tokens = 0
        self.status = Counter[str]()
        self.faults = Counter[str]()
        self.rejected_overload = 0

    def _engine(self) -> PacingEngine | BatchingEngine:
        if self.spec.engine == "pacing":
            return PacingEngine(self.spec.pacing)
        return BatchingEngine(self.spec.batch)

    @property
    def waiting(self) -> int:
        return sum(r.engine.waiting for r in self.replicas)

    def pick(self) -> Replica:
        return min(self.replicas, key=lambda r: r.load)

    def release(self, stream: Stream) -> None:
        if stream.key:
            self.limiter.release(stream.key)
            stream.key = ""

    def output_tokens(self, seq_id: int, max_tokens: int) -> int:
        fraction = self.spec.output_fraction
        if fraction >= 1.0:
            return max_tokens
        low = max(1, round(fraction * max_tokens))
        return random.Random(self.seed * 7_777_777 + seq_id).randint(low, max_tokens)

    def stats(self) -> dict[str, Any]:
        engines = [r.engine for r in self.replicas]
        totals: dict[str, int] = {}
        for name in ("admitted", "queued", "finished", "cancelled", "running", "waiting"):
            totals[name] = sum(getattr(e, name) for e in engines)
        for name in ("preemptions", "prefix_hits", "prefix_hit_tokens", "used_blocks", "peak_used_blocks", "steps"):
            totals[name] = sum(getattr(e, name, 0) for e in engines)
        limiter = self.limiter
        return {
            **totals,
            "tokens_emitted": self.tokens_emitted,
            "tokens_late_over_5ms": self.late_tokens,
            "requests_by_status": dict(self.status),
            "rejected_429": limiter.rejected_concurrency + limiter.rejected_tpm,
            "rejected_429_concurrency": limiter.rejected_concurrency,
            "rejected_429_tpm": limiter.rejected_tpm,
            "rejected_503_overload": self.rejected_overload,
            "early_returns_after_429": limiter.early_returns,
            "faults_injected": dict(self.faults),
        }

    def truth(
        self, users: int | None = None, prompt: int | None = None, max_tokens: int | None = None
    ) -> dict[str, Any]:
        prompt = prompt or REFERENCE_WORKLOAD["prompt_tokens"]
        max_tokens = max_tokens or REFERENCE_WORKLOAD["max_tokens"]
        mean_output = round((1 + self.spec.output_fraction) / 2 * max_tokens)
        spec = self.spec
        out: dict[str, Any] = {
            "engine": spec.engine,
            "replicas": spec.replicas,
            "workload": {"prompt_tokens": prompt, "max_tokens": max_tokens, "mean_output_tokens": mean_output},
            "provider_cap_users": spec.limits.max_concurrent,
            "limits": asdict(spec.limits),
        }
        if spec.engine == "pacing":
            p = spec.pacing
            out["saturation_users"] = p.saturation_users * spec.replicas
            out["params"] = asdict(p)
            if users:
                per = -(-users // spec.replicas)
                out["steady"] = {"users": users, "ttft_s": p.steady_ttft_s(per, mean_output), "itl_s": p.itl_ms / 1e3}
            return out
        b = spec.batch
        out["saturation_users"] = saturation_users(b, prompt, mean_output) * spec.replicas
        out["params"] = {**asdict(b), "decode_table": [list(x) for x in b.decode_table]}
        if users:
            steady = steady_state(b, -(-users // spec.replicas), prompt, mean_output)
            out["steady"] = {**asdict(steady), "users": users, "output_tok_s": steady.output_tok_s * spec.replicas}
        return out


def _error(
    status: int, message: str, err_type: str, code: str | None = None, param: str | None = None, **headers: str
) -> web.Response:
    body = {"error": {"message": message, "type": err_type, "param": param, "code": code}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json", headers=headers)


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.param = param
        self.status = status
        self.code = code

    def response(self) -> web.Response:
        return _error(self.status, str(self), "invalid_request_error", self.code, self.param)


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    max_tokens: int
    stream: bool
    include_usage: bool
    prompt_tokens: int
    prefix_key: str | None
    prefix_tokens: int


_HTTP_FAULTS = {
    "500": (500, "The server had an error while processing your request.", "server_error"),
    "502": (502, "Bad gateway.", "server_error"),
    "503": (503, "The engine is currently overloaded, please try again later.", "server_error"),
}


def cache_prefix(messages: list[dict[str, Any]], mode: str = "auto") -> list[dict[str, Any]]:
    """The cacheable leading messages: up to the last one marked ``cache_control``; in ``auto`` mode, without a
    mark, a leading system message."""
    if mode == "off":
        return []
    marked = [i for i, m in enumerate(messages) if isinstance(m.get("cache_control"), dict) or _part_marked(m)]
    if marked:
        return messages[: marked[-1] + 1]
    if mode == "auto" and messages and messages[0].get("role") in ("system", "developer") and len(messages) > 1:
        return messages[:1]
    return []


def _part_marked(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(p, dict) and "cache_control" in p for p in content)


class SimServer:
    def __init__(self, config: SimConfig, prefix_mode: str = "auto") -> None:
        self.config = config
        self.prefix_mode = prefix_mode
        self.lateness = Histogram()
        self.models = {spec.name: ModelRuntime(spec, config, self.lateness) for spec in config.models}
        self.requests_by_status = Counter[str]()
        self._seq = itertools.count(1)
        self._ordinal = itertools.count(0)

    def finish_all(self) -> None:
        """End every response in flight (shutting down)."""
        for runtime in self.models.values():
            for replica in runtime.replicas:
                for stream in list(replica.streams.values()):
                    replica.cancel(stream)
                    stream.finish()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/sim/stats", self.sim_stats)
        app.router.add_get("/sim/truth", self.sim_truth)
        app.router.add_post("/sim/reset-lateness", self.reset_lateness)
        return app

    def _answer(self, runtime: ModelRuntime | None, response: web.StreamResponse) -> web.StreamResponse:
        key = str(response.status)
        self.requests_by_status[key] += 1
        if runtime is not None:
            runtime.status[key] += 1
        return response

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        try:
            chat = self._parse(await request.read())
        except BadRequest as exc:
            return self._answer(None, exc.response())
        runtime = self.models[chat.model]
        fault = self.config.faults.decide(next(self._ordinal)) if self.config.faults.active else None
        if fault is not None:
            runtime.faults[fault] += 1
        if fault in _HTTP_FAULTS:
            status, message, err_type = _HTTP_FAULTS[fault]
            return self._answer(runtime, _error(status, message, err_type))
        key = _api_key(request)
        client = f"{request.remote}|{request.headers.get('User-Agent', '')}"
        rejection = runtime.limiter.acquire(key, client, chat.prompt_tokens + chat.max_tokens, time.monotonic_ns())
        if rejection is not None:
            headers = {"Retry-After": str(max(1, round(rejection.retry_after_s + 0.4999)))}
            headers["retry-after-ms"] = str(round(rejection.retry_after_s * 1000))
            return self._answer(
                runtime, _error(429, rejection.message, "requests", "rate_limit_exceeded", None, **headers)
            )
        overload = runtime.spec.overload_queue
        if overload is not None and runtime.waiting >= overload:
            runtime.limiter.release(key)
            runtime.rejected_overload += 1
            return self._answer(
                runtime,
                _error(503, "The server is overloaded, please retry later.", "server_error", **{"Retry-After": "1"}),
            )
        return await self._generate(request, runtime, chat, key, fault)

    async def _generate(
        self, request: web.Request, runtime: ModelRuntime, chat: ChatRequest, key: str, fault: str | None
    ) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        seq_id = next(self._seq)
        output = runtime.output_tokens(seq_id, chat.max_tokens)
        seq = SeqRequest(seq_id, chat.prompt_tokens, output, chat.prefix_key, chat.prefix_tokens)
        replica = runtime.pick()
        close = fault == "close" or self.config.close_after_response
        if not chat.stream:
            stream = Stream(seq_id, chat.model, chat.prompt_tokens, output, None, True, loop.create_future(), key)
            replica.submit(stream, seq)
            await stream.done
            body = orjson.dumps(self._completion(stream))
            headers = {"Connection": "keep-alive"} if close else None
            resp = self._answer(runtime, web.Response(body=body, content_type="application/json", headers=headers))
            if close:
                self._close_after(request)
            return resp
        headers = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
        if close:
            headers["Connection"] = "keep-alive"
        resp = web.StreamResponse(headers=headers)
        resp.enable_chunked_encoding()
        stream = Stream(
            seq_id, chat.model, chat.prompt_tokens, output, request.transport, chat.include_usage,
            loop.create_future(), key, fault,
        )  # fmt: skip
        self._answer(runtime, resp)
        try:
            await resp.prepare(request)
            await resp.write(stream.role_chunk())
            replica.submit(stream, seq)
            await stream.done
            transport = request.transport
            if transport is not None and not transport.is_closing():
                await resp.write_eof()
                if close:
                    self._close_after(request)
        except ConnectionError:
            pass  # the client went away: a load generator stopping its users does that
        finally:
            replica.cancel(stream)  # frees its KV blocks if it was still generating
            runtime.release(stream)  # its rate-limit slot, if not released yet
        return resp

    def _close_after(self, request: web.Request) -> None:
        """Close the connection once the response is out, although keep-alive was advertised. With a delay, the
        server stops reading first: a request sent on the connection meanwhile gets no byte of answer."""
        transport = request.transport
        if transport is None:
            return
        delay = self.config.close_delay_s
        if delay <= 0:
            asyncio.get_running_loop().call_soon(transport.close)
            return
        transport.pause_reading()
        asyncio.get_running_loop().call_later(delay, transport.close)

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
                f"The model '{model}' does not exist or you do not have access to it.", "model", 404, "model_not_found"
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
        n_prompt = prompt_tokens(messages)
        if n_prompt + max_tokens > context:
            raise BadRequest(
                f"This model's maximum context length is {context} tokens. However, you requested "
                f"{n_prompt + max_tokens} tokens ({n_prompt} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion.",
                "messages",
                400,
                "context_length_exceeded",
            )
        prefix = cache_prefix(messages, self.prefix_mode)
        prefix_key = hashlib.blake2b(orjson.dumps(prefix), digest_size=12).hexdigest() if prefix else None
        prefix_tokens = prompt_tokens(prefix) - 3 if prefix else 0
        return ChatRequest(model, messages, max_tokens, stream, include_usage, n_prompt, prefix_key, prefix_tokens)

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
            "truth": {name: rt.truth() for name, rt in self.models.items()},
            "requests_by_status": dict(self.requests_by_status),
            "lateness_ms": {
                "count": self.lateness.count,
                "p50": self.lateness.quantile(0.5) / 1e6,
                "p99": self.lateness.quantile(0.99) / 1e6,
                "max": self.lateness.max / 1e6,
            },
            "cpu_s": usage.ru_utime + usage.ru_stime,
        }
        return web.json_response(body)

    async def reset_lateness(self, request: web.Request) -> web.Response:
        """Start the token-emission lateness histogram afresh (benchmarks measure one phase at a time)."""
        self.lateness.clear()
        return web.json_response({"status": "ok"})

    async def sim_truth(self, request: web.Request) -> web.Response:
        q = request.query
        name = q.get("model", self.config.default_model)
        if name not in self.models:
            return _error(404, f"unknown model {name!r}", "invalid_request_error", "model_not_found", "model")
        try:
            users = int(q.get("users", "0"))
            prompt = int(q.get("prompt_tokens", "0")) or None
            max_tokens = int(q.get("max_tokens", "0")) or None
        except ValueError:
            return _error(400, "users, prompt_tokens and max_tokens must be integers", "invalid_request_error")
        return web.json_response(self.models[name].truth(users or None, prompt, max_tokens))


class BehindWatch:
    """Warns (on stderr, at most once a minute) when over 1 % of the tokens of the last interval were late: the
    simulator itself is then the bottleneck and its timing is no longer the ground truth."""

    def __init__(self, server: SimServer) -> None:
        self.server = server
        self.last = self._totals()
        self.warned_ns = 0

    def _totals(self) -> tuple[int, int]:
        models = self.server.models.values()
        return sum(m.tokens_emitted for m in models), sum(m.late_tokens for m in models)

    def check(self, now_ns: int) -> str | None:
        tokens, late = self._totals()
        d_tokens, d_late = tokens - self.last[0], late - self.last[1]
        self.last = (tokens, late)
        if d_tokens and d_late > 0.01 * d_tokens and now_ns - self.warned_ns > 60 * 10**9:
            self.warned_ns = now_ns
            return (
                f"locust-llm sim: warning: falling behind: {100 * d_late / d_tokens:.0f}% of the last {d_tokens} "
                "tokens were written more than 5 ms late; timing is not ground truth now (too many streams for "
                "one simulator process on this machine?)"
            )
        return None


def _api_key(request: web.Request) -> str:
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else "anonymous"


async def serve(
    config: SimConfig,
    host: str,
    port: int,
    parent_pid: int | None = None,
    ready_fd: int = 1,
    prefix_mode: str = "auto",
) -> None:
    """Serve until SIGINT/SIGTERM, or until the parent process ``parent_pid`` has gone.

    Prints ``locust-llm sim listening on http://HOST:PORT/v1`` (one line) once it accepts connections.
    """
    server = SimServer(config, prefix_mode)
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0)
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
    watch = BehindWatch(server)
    ticks = 0
    try:
        while not stop.is_set():
            if parent_pid is not None and os.getppid() != parent_pid:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
            ticks += 1
            if ticks % 10 == 0 and (warning := watch.check(time.monotonic_ns())):
                print(warning, file=sys.stderr, flush=True)
    finally:
        server.finish_all()
        await runner.cleanup()
