"""A step whose alarm is overdue is emitted by the next request handler (``Replica.catch_up``), once: the alarm that
rings after it finds nothing to do and leaves the write lead's estimate alone (in-process, on a real loop)."""

import asyncio
import time

from locust_llm.sim.engine import PacingParams, SeqRequest
from locust_llm.sim.presets import ModelSpec, SimConfig
from locust_llm.sim.response import Stream
from locust_llm.sim.server import SimServer
from locust_llm.sim.words import token_text

TTFT_MS = 20.0


def overdue_step(tokens: int) -> tuple[list[str], list[str], int, int]:
    """Submit a non-streamed answer of ``tokens`` tokens, hold the loop past its first step's planned instant, let a
    handler catch up, then let the loop run until the answer is done. Returns the text right after the catch-up,
    the whole text, and the write lead's token estimate right after the catch-up and at the end."""

    async def scenario() -> tuple[list[str], list[str], int, int]:
        spec = ModelSpec("m", engine="pacing", pacing=PacingParams(ttft_ms=TTFT_MS, itl_ms=5, capacity=4))
        server = SimServer(SimConfig(models=(spec,)))
        replica = server.models["m"].replicas[0]
        loop = asyncio.get_running_loop()
        stream = Stream(1, "m", 10, tokens, None, True, loop.create_future())
        replica.submit(stream, SeqRequest(1, 10, tokens))
        deadline = time.monotonic_ns() + 10 * int(TTFT_MS * 1e6)  # bounded; the planned instant is ~20 ms away
        while time.monotonic_ns() <= replica._planned_ns and time.monotonic_ns() < deadline:
            pass  # the loop is busy (a burst of handlers): the alarm cannot ring
        server._catch_up()
        after_catch_up, estimate = list(stream.text), replica.lead.tokens
        await asyncio.wait_for(stream.done, 10)
        await asyncio.sleep(0.05)  # any stale ring of the alarm is handled
        server.finish_all()
        return after_catch_up, list(stream.text), estimate, replica.lead.tokens

    return asyncio.run(scenario())


def test_an_overdue_step_is_emitted_by_the_handler_and_not_again_by_the_alarm():
    seed = 0  # SimConfig's default
    after_catch_up, text, estimate, final = overdue_step(1)
    assert after_catch_up == [token_text(seed, 1, 0)]  # emitted in the handler, before the loop turned
    assert text == after_catch_up  # the alarm, already readable, rang for nothing
    assert estimate == final == 1  # and left the lead's estimate of the step's tokens as it was


def test_the_steps_after_a_catch_up_go_on_from_the_alarm():
    seed = 0  # SimConfig's default
    after_catch_up, text, _estimate, _final = overdue_step(3)
    assert after_catch_up == [token_text(seed, 1, 0)]
    assert text == [token_text(seed, 1, i) for i in range(3)]  # each token once, in order


def test_a_reply_sliced_from_the_period_is_the_tokens_joined():
    """``token_texts`` (the reply a conversation caches) against one ``token_text`` call per token, on 2,000 random
    sequences, spans and seeds, periods crossed and empty spans included."""
    import random

    from locust_llm.sim.words import token_texts

    rng = random.Random(7)
    for _ in range(2000):
        seed, seq_id = rng.randrange(10**6), rng.randrange(10**9)
        start, end = rng.randrange(300), rng.randrange(500)
        assert token_texts(seed, seq_id, start, end) == "".join(token_text(seed, seq_id, i) for i in range(start, end))
