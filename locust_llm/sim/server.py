"""The simulator's HTTP front (aiohttp): OpenAI-compatible routes around the replicas, and :func:`serve`.

Routes: ``POST /v1/chat/completions`` (streamed or not; ``/v1/responses``, ``/v1/messages`` and ``/v1/completions``
streamed, in the same engine), ``GET /v1/models``, ``GET /health``, ``GET /sim/stats``
(counters, truth, lateness), ``GET /sim/truth`` (the expected steady state for a load, or an open-loop replay) and
``POST /sim/reset-lateness``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import itertools
import os
import resource
import signal
import socket
import sys
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from locust_llm.config.gc_settings import tune_gc
from locust_llm.config.parsers import parse_arrivals
from locust_llm.protocol.metrics import ANTHROPIC_RATELIMIT_HEADERS, RATELIMIT_HEADERS
from locust_llm.sim import exposition, realtime, serve_completions, serve_messages, serve_responses
from locust_llm.sim.chunks import ChunkFormat, completion_body, error_body
from locust_llm.sim.engine import SeqRequest
from locust_llm.sim.presets import SimConfig
from locust_llm.sim.replicas import ModelRuntime
from locust_llm.sim.request import BadRequest, ChatRequest, parse_chat_request
from locust_llm.sim.response import Stream
from locust_llm.sim.timing import BehindWatch, EmissionError

__all__ = ["KEPT_RESPONSES", "SimServer", "serve"]

KEPT_RESPONSES = 10_000
"""Responses API answers kept for ``previous_response_id`` (the oldest is forgotten first: memory stays bounded)."""

_HTTP_FAULTS = {
    "500": (500, "The server had an error while processing your request.", "server_error"),
    "502": (502, "Bad gateway.", "server_error"),
    "503": (503, "The engine is currently overloaded, please try again later.", "server_error"),
}


class _EventStream(web.StreamResponse):
    """A streamed answer whose head leaves with its first chunk, in one write (aiohttp buffers the head until the
    first body write when ``_send_headers_immediately`` is false, as its ``Response`` does): one system call and one
    client wake-up fewer per request."""

    _send_headers_immediately = False


def _error(
    status: int, message: str, err_type: str, code: str | None = None, param: str | None = None, **headers: str
) -> web.Response:
    body = error_body(message, err_type, code, param)
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def _bad_request(exc: BadRequest) -> web.Response:
    return _error(exc.status, str(exc), "invalid_request_error", exc.code, exc.param)


class SimServer:
    def __init__(self, config: SimConfig, prefix_mode: str = "auto") -> None:
        self.config = config
        self.prefix_mode = prefix_mode
        self.emission = EmissionError()
        self.models = {spec.name: ModelRuntime(spec, config, self.emission) for spec in config.models}
        self.metrics_scrapes = 0  # GET /metrics answered
        self.requests_by_status = Counter[str]()
        self.requests_by_key = Counter[str]()  # a key's fingerprint (key_fingerprint), never the key
        self._contexts = {name: rt.spec.context_tokens for name, rt in self.models.items()}
        self._seq = itertools.count(1)
        self._kept: OrderedDict[str, list[Any]] = OrderedDict()
        self.responses_chained = 0
        self.tool_results = 0  # requests that sent a tool's result back
        """The Responses API's kept responses (``store``), by id: their messages and answer, the latest
        :data:`KEPT_RESPONSES`."""
        self._ordinal = itertools.count(0)
        self._replicas = [replica for runtime in self.models.values() for replica in runtime.replicas]

    def finish_all(self) -> None:
        """End every response in flight (shutting down)."""
        for runtime in self.models.values():
            for replica in runtime.replicas:
                for stream in list(replica.streams.values()):
                    replica.cancel(stream)
                    stream.finish()
                replica.close()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_get("/props", self.props)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics)
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

    def _catch_up(self, now: int | None = None) -> None:
        """Emit every step whose alarm is overdue (:meth:`Replica.catch_up`)."""
        if now is None:
            now = time.monotonic_ns()
        for replica in self._replicas:
            replica.catch_up(now)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, "chat")

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, "responses")

    async def messages(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, "messages")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, "completions")

    async def _complete(self, request: web.Request, api: str) -> web.StreamResponse:
        """One request of ``api``, taken in chat form (``sim/serve_*.py``) by the same engine."""
        taken = time.monotonic_ns()  # the delivered TTFT's start: the client waits through the catch-up too
        self._catch_up(taken)
        self.requests_by_key[key_fingerprint(_api_key(request))] += 1
        body = await request.read()
        self._catch_up()
        try:
            store = False
            if api != "chat":
                body, store = _as_chat(api, body, request.headers.get("anthropic-version"), self._chain)
            chat = parse_chat_request(body, self._contexts, self.prefix_mode, self.config.min_tokens)
            if api != "chat" and not chat.stream:
                raise BadRequest(f"This simulator answers /v1/{api} streamed only: set 'stream': true.", "stream")
        except BadRequest as exc:
            return self._answer(None, _bad_request(exc))
        runtime = self.models[chat.model]
        if chat.messages[-1].get("role") == "tool":
            self.tool_results += 1
        fault = self.config.faults.decide(next(self._ordinal)) if self.config.faults.active else None
        if fault is not None:
            runtime.faults[fault] += 1
        if fault in _HTTP_FAULTS:
            status, message, err_type = _HTTP_FAULTS[fault]
            if status == 503 and api == "messages":  # Anthropic's "overloaded"
                status, err_type = 529, _OVERLOADED[api]
            return self._answer(runtime, _error(status, message, err_type))
        limits: Callable[[str], dict[str, str]] = runtime.limiter.headers
        if api == "messages":
            limits = _anthropic_headers(limits)
        key = _api_key(request)
        client = f"{request.remote}|{request.headers.get('User-Agent', '')}"
        rejection = runtime.limiter.acquire(key, client, chat.prompt_tokens + chat.max_tokens, time.monotonic_ns())
        if rejection is not None:
            headers = {"Retry-After": str(max(1, round(rejection.retry_after_s + 0.4999)))}
            headers["retry-after-ms"] = str(round(rejection.retry_after_s * 1000))
            headers.update(limits(key))
            return self._answer(
                runtime, _error(429, rejection.message, "requests", "rate_limit_exceeded", None, **headers)
            )
        overload = runtime.spec.overload_queue
        if overload is not None and runtime.waiting >= overload:
            runtime.limiter.release(key)
            runtime.rejected_overload += 1
            status = 529 if api == "messages" else 503  # Anthropic's "overloaded"
            return self._answer(
                runtime,
                _error(
                    status, "The server is overloaded, please retry later.", _OVERLOADED[api], **{"Retry-After": "1"}
                ),
            )
        return await self._generate(request, runtime, chat, key, fault, taken, api, limits, store)

    async def _generate(
        self,
        request: web.Request,
        runtime: ModelRuntime,
        chat: ChatRequest,
        key: str,
        fault: str | None,
        taken: int,
        api: str = "chat",
        limits: Callable[[str], dict[str, str]] | None = None,
        store: bool = False,
    ) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        seq_id = next(self._seq)
        output = runtime.output_tokens(seq_id, chat.max_tokens, chat.min_tokens)
        seq = SeqRequest(
            seq_id, chat.prompt_tokens, output, chat.prefix_key, chat.prefix_tokens, chat.lookups, chat.inserts
        )
        replica = runtime.pick()
        close = fault == "close" or self.config.close_after_response
        if not chat.stream:
            stream = Stream(
                seq_id,
                chat.model,
                chat.prompt_tokens,
                output,
                None,
                True,
                loop.create_future(),
                key,
                history=chat.history,
            )
            replica.submit(stream, seq)
            await stream.done
            body = completion_body(
                stream.fmt, "".join(stream.text), stream.prompt_tokens, stream.output_tokens, stream.cached
            )
            headers = {"Connection": "keep-alive"} if close else None
            resp = self._answer(runtime, web.Response(body=body, content_type="application/json", headers=headers))
            if close:
                self._close_after(request)
            return resp
        headers = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
        headers.update((limits or runtime.limiter.headers)(key))
        if close:
            headers["Connection"] = "keep-alive"
        resp = _EventStream(headers=headers)
        resp.enable_chunked_encoding()
        stream = Stream(
            seq_id,
            chat.model,
            chat.prompt_tokens,
            output,
            request.transport,
            chat.include_usage,
            loop.create_future(),
            key,
            fault,
            min(runtime.spec.reasoning_tokens, output - 1),
            chat.history,
            taken,
            _FORMATS[api],
            chat.tool,
        )
        self._answer(runtime, resp)
        try:
            await resp.prepare(request)
            await resp.write(stream.fmt.role_chunk())
            replica.submit(stream, seq)
            await stream.done
            self._catch_up()  # a whole batch can end at one step: its handlers all wake up now
            if store:
                self._keep(
                    getattr(stream.fmt, "response_id", ""),
                    [*chat.messages, {"role": "assistant", "content": stream.reply(self.config.seed)}],
                )
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

    def _chain(self, response_id: str) -> list[Any] | None:
        """The kept history of ``response_id`` (a ``previous_response_id``), counted in ``/sim/stats``."""
        history = self._kept.get(response_id)
        if history is not None:
            self.responses_chained += 1
        return history

    def _keep(self, response_id: str, messages: list[Any]) -> None:
        """Keep a Responses API answer for ``previous_response_id``: the latest :data:`KEPT_RESPONSES`."""
        self._kept[response_id] = messages
        if len(self._kept) > KEPT_RESPONSES:
            self._kept.popitem(last=False)

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

    async def list_models(self, request: web.Request) -> web.Response:
        return web.json_response(exposition.models(self._contexts))

    async def props(self, request: web.Request) -> web.Response:
        return web.json_response(exposition.props(next(iter(self.models.values())).spec))

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def sim_stats(self, request: web.Request) -> web.Response:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        body = {
            "models": {name: rt.stats() for name, rt in self.models.items()},
            "truth": {name: rt.truth() for name, rt in self.models.items()},
            "requests_by_status": dict(self.requests_by_status),
            "requests_by_key": dict(self.requests_by_key),
            "metrics_scrapes": self.metrics_scrapes,
            "responses_chained": self.responses_chained,  # requests that named a kept previous_response_id
            "tool_results": self.tool_results,  # requests whose last message is a tool's result
            **self.emission.stats(),  # lateness_ms: |written - due| of every token; early_ms (sim/timing.py)
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "scheduling": realtime.policy(),  # fifo under --realtime (sim/realtime.py)
            "gc": {"threshold": gc.get_threshold()[0], "collections": [g["collections"] for g in gc.get_stats()]},
        }
        return web.json_response(body)

    async def metrics(self, request: web.Request) -> web.Response:
        """Prometheus text in vLLM's names (``vllm:kv_cache_usage_perc``, ...), one sample per model, from each
        engine's own state (:meth:`ModelRuntime.gauges`)."""
        self.metrics_scrapes += 1
        gauges = {name: rt.gauges() for name, rt in self.models.items()}
        specs = {name: rt.spec for name, rt in self.models.items()}
        lines = exposition.metrics(gauges, self.config.metrics_omit) + exposition.cache_config(specs, self.prefix_mode)
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain", charset="utf-8")

    async def reset_lateness(self, request: web.Request) -> web.Response:
        """Start the token-emission error histograms afresh (benchmarks measure one phase at a time)."""
        self.emission.clear()
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
            min_tokens = int(q.get("min_tokens", "0")) if self.config.min_tokens == "honour" else 0
            rate = float(q.get("rate", "0"))
            prefix = int(q.get("prefix_tokens", "0"))
            marked = q.get("prefix_marked", "0") == "1"
            arrivals = parse_arrivals(q.get("arrivals", "poisson"))
        except ValueError as exc:
            return _error(
                400,
                f"users, prompt_tokens, max_tokens, min_tokens and prefix_tokens must be integers, rate a number: "
                f"{exc}",
                "invalid_request_error",
            )
        runtime = self.models[name]
        if rate > 0:  # an open loop: replayed through a fresh engine (CPU-bound, once per run)
            truth = runtime.open_loop_truth(rate, arrivals, q.get("seed", "0"), prompt, max_tokens, min_tokens)
            return web.json_response(truth)
        shared = prefix if self.prefix_mode == "auto" or (self.prefix_mode == "hint" and marked) else 0
        return web.json_response(runtime.truth(users or None, prompt, max_tokens, shared, min_tokens))


def _api_key(request: web.Request) -> str:
    """The request's key: ``Authorization: Bearer KEY``, else Azure OpenAI's ``api-key`` or Anthropic's
    ``x-api-key`` header."""
    auth = request.headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    headers = request.headers
    return (headers.get("api-key", "") or headers.get("x-api-key", "")).strip() or "anonymous"


_FORMATS: dict[str, type[Any]] = {
    "chat": ChunkFormat,
    "responses": serve_responses.ResponsesFormat,
    "messages": serve_messages.MessagesFormat,
    "completions": serve_completions.CompletionsFormat,
}


def _as_chat(api: str, raw: bytes, version: str | None, kept: Callable[[str], list[Any] | None]) -> tuple[bytes, bool]:
    """A request of ``api`` (not chat) as a chat completion's body, and whether its answer is kept (the Responses
    API's ``store``, true unless false). Raises :class:`BadRequest`."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise BadRequest("We could not parse the JSON body of your request.") from None
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    if api == "responses":
        chat = serve_responses.as_chat(body, kept)
    elif api == "messages":
        chat = serve_messages.as_chat(body, version)
    else:
        chat = serve_completions.as_chat(body)
    return orjson.dumps(chat), api == "responses" and body.get("store", True) is not False


def _anthropic_headers(headers: Callable[[str], dict[str, str]]) -> Callable[[str], dict[str, str]]:
    """``headers`` (the limiter's ``x-ratelimit-*``) under the names the Messages API uses."""

    def renamed(key: str) -> dict[str, str]:
        return {_ANTHROPIC_NAMES.get(name, name): value for name, value in headers(key).items()}

    return renamed


_OVERLOADED = {"messages": "overloaded_error"} | dict.fromkeys(("chat", "responses", "completions"), "server_error")
_ANTHROPIC_NAMES = dict(zip(RATELIMIT_HEADERS, ANTHROPIC_RATELIMIT_HEADERS, strict=True))


def key_fingerprint(key: str) -> str:
    """What ``/sim/stats`` shows of a key (``requests_by_key``): the first 12 hex digits of its SHA-256."""
    return "anonymous" if key == "anonymous" else hashlib.sha256(key.encode()).hexdigest()[:12]


async def serve(
    config: SimConfig,
    host: str,
    port: int,
    parent_pid: int | None = None,
    ready_fd: int = 1,
    prefix_mode: str = "auto",
    tls_dir: str | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM, or until the parent process ``parent_pid`` has gone.

    Prints ``locust-llm sim listening on http://HOST:PORT/v1`` (one line) once it accepts connections. With
    ``tls_dir``, serves HTTPS with a fresh certificate written there (:mod:`locust_llm.sim.certs`), and first prints
    ``locust-llm sim TLS CA: PATH`` (the file a client trusts).
    """
    server = SimServer(config, prefix_mode)
    # handler_cancellation: a request whose client went away is cancelled at once (its handler's ``finally`` frees
    # its queue place, KV blocks and rate-limit slot), as a serving engine aborts it; not when its turn would come
    runner = web.AppRunner(
        server.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0, handler_cancellation=True
    )
    await runner.setup()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    context, scheme = None, "http"
    if tls_dir is not None:
        from locust_llm.sim.certs import make_certificates  # cryptography loads only for HTTPS

        certs = make_certificates(tls_dir, host)
        context, scheme = certs.server_context(), "https"
        os.write(ready_fd, f"locust-llm sim TLS CA: {certs.ca_path}\n".encode())
    site = web.SockSite(runner, sock, ssl_context=context)
    await site.start()
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    os.write(ready_fd, f"locust-llm sim listening on {scheme}://{shown}:{bound}/v1\n".encode())
    tune_gc()  # no collection stalls the writes of hundreds of streams (locust_llm/config/gc_settings.py)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    watch = BehindWatch(server.models)
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
