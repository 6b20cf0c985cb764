"""``LLMUserMixin``: what every locust-llm user shares: config, workload, seeded randomness, the flow, pacing.

A user class mixes it into a Locust ``User``, implements :meth:`LLMUserMixin.send` (one attempt on one model) and calls
:meth:`LLMUserMixin.setup_llm`. Its one task, :meth:`LLMUserMixin.chat_once`, makes client requests through the
:class:`~locust_llm.users.flow.Flow`, the next sent from inside the task; with ``--turns``, turns of a conversation.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gevent

from locust_llm import __version__
from locust_llm.http.attempt import FirstToken
from locust_llm.http.loop import poll_count
from locust_llm.protocol.api import Api
from locust_llm.protocol.metrics import RequestResult
from locust_llm.users.flow import Flow
from locust_llm.users.open_loop import OpenLoop
from locust_llm.workload.conversation import Conversation

if TYPE_CHECKING:  # importing Locust monkey-patches the process with gevent: only the user classes do it
    from locust.env import Environment

    from locust_llm.runtime.run import LLMRun

__all__ = ["LLMUserMixin"]

_NUMBERS = itertools.count(1)
_RUNNING = "running"
"""Locust's state of a user running its tasks (``locust.user.users.LOCUST_STATE_RUNNING``)."""


def _paced_by_itself(kind: Any) -> bool:
    """Whether Locust's task loop would only come back to ``kind``'s one task at once: ``chat_once`` is its only task
    and :meth:`LLMUserMixin.wait_time` is not overridden (else Locust chooses and paces). Judged once per class."""
    paced = _PACED.get(kind)
    if paced is None:
        paced = _PACED[kind] = kind.tasks == [LLMUserMixin.chat_once] and kind.wait_time is LLMUserMixin.wait_time
    return paced


_PACED: dict[Any, bool] = {}


class LLMUserMixin:
    """Mix into a Locust ``User``; subclasses implement :meth:`send`."""

    first_request_spread_s = 1.0
    """The first request waits a random fraction of this, so that a step's users do not fire in lock-step."""

    llm: LLMRun
    open_loop: OpenLoop | None = None
    conversation: Conversation | None = None
    keep_reply = False
    ask_tool = False
    """Whether this client request asks for a tool call (``--tool-call-share``, drawn per client request)."""
    fast_path = True
    """Whether this user's requests take locust-llm's fast path (``--fast-path``, and its assumptions held)."""
    """Whether :meth:`send` keeps the answer's text in ``RequestResult.reply`` (conversations need it)."""
    _pause: float | None = None
    """A pause above zero drawn by :meth:`_next_in_task`, for Locust's next ``wait_time()`` call."""

    def setup_llm(self, environment: Environment) -> None:
        from locust_llm.runtime.run import llm_run

        self.llm = llm_run(environment)
        self.config = config = self.llm.require_config()
        self.user_number = next(_NUMBERS)
        worker = getattr(environment.runner, "worker_index", 0)
        seed = None if config.seed is None else f"{config.seed}:{worker}:{self.user_number}"
        self.rng = random.Random(seed)
        self.workload = config.workload
        self.keep_reply = config.conversations
        self.turn = 0
        self.flow = Flow(
            self._send_turn if self.keep_reply else self.send,
            self.llm.recorder,
            config.flow,
            self.rng,
            error_backoff=not config.open_loop,
        )
        self.user_agent = f"locust-llm/{__version__} (user {os.getpid()}-{self.user_number})"
        self.fast_path = self.llm.fast_path
        self._intended_ns = 0
        if config.open_loop:
            self.open_loop = OpenLoop(self.llm, config, self.workload, self.rng, self.flow, worker)

    def send(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        max_tokens: int,
        intended_ns: int,
        on_first_token: FirstToken | None,
    ) -> RequestResult:
        """One attempt of ``messages`` on ``model``, meant to start at ``intended_ns`` (see :class:`Flow`)."""
        raise NotImplementedError

    def _send_turn(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        max_tokens: int,
        intended_ns: int,
        on_first_token: FirstToken | None,
    ) -> RequestResult:
        """:meth:`send`, its result marked with the conversation's turn (in open loop, its session's)."""
        result = self.send(model, messages, max_tokens, intended_ns, on_first_token)
        result.turn = self.turn if self.open_loop is None else getattr(self.open_loop.turn, "number", 0)
        return result

    def chained(
        self, model: str, messages: Sequence[dict[str, Any]]
    ) -> tuple[Sequence[dict[str, Any]], dict[str, Any] | None]:
        """``--conversation-state server``: what a turn to ``model`` sends (its new message alone, when ``model`` kept
        the last answer) and the fields that chain it (``previous_response_id``; ``store: true`` on every turn, so the
        server keeps each answer). A fallback to another model gets the whole history."""
        if self.config.conversation_state != "server" or self.conversation is None or self.open_loop is not None:
            return messages, None
        previous = self.conversation.previous
        if previous is not None and previous[0] == model and self.conversation.turn > 1:
            new = self.conversation.new_messages
            return messages[-new:], {"store": True, "previous_response_id": previous[1]}
        return messages, {"store": True}

    def tool_fields(self, api: Api) -> dict[str, Any] | None:
        """The fields that offer ``--tools`` in ``api``'s form, asking for a call when this client request drew one
        (``--tool-call-share``, :attr:`ask_tool`)."""
        tools = self.workload.tools
        if not tools or api.tools is None:
            return None
        return api.tools(tools, self.ask_tool)

    def exact_lengths(self, endpoint: str) -> bool:
        """Whether requests to ``endpoint`` (the primary model, or a route) ask for ``max_tokens`` exactly:
        ``--output-length`` as the preflight resolved it (the master's, on a worker)."""
        return self.llm.collector.exact_lengths.get(endpoint, self.workload.output_length == "exact")

    def think_time_s(self) -> float:
        """Seconds to wait after a request before the next one (closed loop): ``--think-time`` between the turns of a
        conversation, else 0."""
        conversation = self.conversation
        if conversation is None or conversation.finished:
            return 0.0
        return self.workload.think_time.draw(self.rng)

    def wait_time(self) -> float:
        seconds = self.think_time_s() if self._pause is None else self._pause
        self._pause = None
        self._intended_ns = time.perf_counter_ns() + int(seconds * 1e9)
        return seconds

    def on_start(self) -> None:
        now = time.perf_counter_ns()
        for model, until_ns in self.llm.collector.holds.items():  # a preflight was told to come back later: so is
            if until_ns > now:  # every user, there
                self.flow.hold(model, until_ns)
        if self.open_loop is not None:
            return  # arrivals are spread by their schedule
        delay = self.rng.random() * self.first_request_spread_s
        self._intended_ns = time.perf_counter_ns() + int(delay * 1e9)
        gevent.sleep(delay)

    def on_stop(self) -> None:
        if self.open_loop is not None:
            self.open_loop.stop()

    def chat_once(self) -> None:
        """The user classes' task: a client request, and the next ones at once while nothing would come between them
        (:meth:`_next_in_task`); none once the run was stopped (see ``LLMRun.fatal``). With ``--rates``, the task runs
        this process's arrivals instead (:mod:`locust_llm.users.open_loop`)."""
        if self.llm.fatal_message:
            gevent.sleep(1.0)
            return
        if self.open_loop is not None:
            self.open_loop.run()
            return
        fast = self.fast_path  # the library path does not read libev's count of polls
        share = self.workload.tool_call_share
        while True:
            polls = poll_count() if fast else 0
            self.ask_tool = share is not None and self.rng.random() < share
            if self.keep_reply:
                self._next_turn()
            else:
                messages, max_tokens = self.workload.messages(self.rng)
                self.flow.request(self.llm.model, messages, max_tokens, self._intended_ns or time.perf_counter_ns())
            if not self._next_in_task(fast and poll_count() != polls):
                return

    def _next_in_task(self, waited: bool) -> bool:
        """Whether the next request is sent from inside this task, where Locust's task loop would only come back to it
        at once: this is the class's only task and :meth:`wait_time` is not overridden (else Locust chooses and
        paces), the user is running (a graceful stop ends it here, as Locust's pause would), the run was not stopped,
        and the pause drawn for the next request (:meth:`think_time_s`, drawn once: a pause above zero is kept for
        Locust's ``wait_time()`` call) is zero, its start dated now as :meth:`wait_time` dates it. Locust's zero pause
        is a ``gevent.sleep(0)``, which lets the other greenlets ready to run go first; it is slept here only when the
        request never waited on the event loop (``waited``: libev's count of polls moved during it; not, for a
        connection refused at once): one that waited let them run then."""
        if not _paced_by_itself(type(self)) or not self._running():
            return False
        seconds = self.think_time_s()
        if seconds > 0:
            self._pause = seconds
            return False
        self._intended_ns = time.perf_counter_ns()
        if waited:
            return True
        gevent.sleep(0)
        return self._running()  # a stop may have come while the others ran

    def _running(self) -> bool:
        """Locust's user is running (``_state``, which Locust's ``User`` has) and the run was not stopped."""
        return getattr(self, "_state", None) == _RUNNING and not self.llm.fatal_message

    def _next_turn(self) -> None:
        """The next turn of the user's conversation (a new one when it ended)."""
        conversation = self.conversation
        turn = None if conversation is None or conversation.finished else conversation.next_turn(self.rng)
        if conversation is None or turn is None:
            conversation = self.conversation = Conversation(self.workload, self.rng)
            turn = conversation.next_turn(self.rng)
            assert turn is not None  # a first turn is always sent
        messages, max_tokens = turn
        self.turn = conversation.turn
        result = self.flow.request(self.llm.model, messages, max_tokens, self._intended_ns or time.perf_counter_ns())
        if result.ok:
            conversation.answered(result.reply, result.model, result.response_id, result.tools, self.rng)
        else:
            conversation.end()

    tasks: list[Any] = [chat_once]
    """Locust collects a base class's ``tasks``: every user class that mixes this in runs :meth:`chat_once`."""
