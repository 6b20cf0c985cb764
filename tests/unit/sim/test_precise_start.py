"""A large step starts precisely, in two phases (``locust_llm/sim/timing.py``): its chunks are made when its alarm
rings, the loop is free until its writes' instant, and they begin at that instant; a small step is written as soon
as it is made. In-process, on a real loop, with the batching engine's streams in lock step; the order of events, not
their timing, is what is checked, and the margins are milliseconds wide."""

import asyncio
import time

from locust_llm.sim.batching import BatchParams
from locust_llm.sim.engine import SeqRequest
from locust_llm.sim.presets import ModelSpec, SimConfig
from locust_llm.sim.response import Stream
from locust_llm.sim.server import SimServer
from locust_llm.sim.timing import SPIN_SPAN_NS, WINDOW

STEP_MS, STREAMS, TOKENS = 20.0, 8, 4
WAKE_NS = 9_000_000  # the wake delay the lead has learnt: the alarm rings ~9 ms before the writes' instant


class Transport:
    def __init__(self, events: list[tuple[str, int]], seq_id: int) -> None:
        self.events, self.seq_id = events, seq_id

    def is_closing(self) -> bool:
        return False

    def write(self, chunk: bytes) -> None:
        self.events.append(("write", self.seq_id))


def first_step(cost_ns: int, cancel_one: bool = False) -> tuple[list[tuple[str, int]], dict[str, int]]:
    """Eight streams submitted at once (the first alone in the first step, then all in lock step), the write
    lead taught that one write costs ``cost_ns`` and that a step is ready WAKE_NS after its alarm; run until a step
    of all eight has been made. Returns the events in order ("made" with its writes, "loop": a callback queued when
    the chunks were made, "write" per token) and the last step's instants."""

    async def scenario() -> tuple[list[tuple[str, int]], dict[str, int]]:
        batch = BatchParams(decode_table=((8192, STEP_MS),), prefill_ms_per_1k=0.0)
        spec = ModelSpec("m", batch=batch, context_tokens=64)
        server = SimServer(SimConfig(models=(spec,)))
        replica = server.models["m"].replicas[0]
        for _ in range(WINDOW):
            replica.lead.observe(STREAMS, WAKE_NS, STREAMS * cost_ns)
        loop = asyncio.get_running_loop()
        events: list[tuple[str, int]] = []
        streams = [Stream(i, "m", 10, TOKENS, Transport(events, i), True, loop.create_future()) for i in range(STREAMS)]
        seen: dict[str, int] = {}
        make, write = replica._make, replica._write

        def in_the_loop(writes: int) -> None:
            events.append(("loop", 0))
            if cancel_one and writes == STREAMS and streams[0].seq_id in replica.streams:
                replica.cancel(streams[0])  # its client went away while the step waited

        def made(emissions, due):
            result = make(emissions, due)
            events.append(("made", len(result.writes)))
            loop.call_soon(in_the_loop, len(result.writes))
            return result

        def written(made_step):
            seen["start"] = made_step.start
            seen["begin"], seen["end"] = write(made_step)
            return seen["begin"], seen["end"]

        replica._make, replica._write = made, written  # type: ignore[method-assign]
        for stream in streams:
            replica.submit(stream, SeqRequest(stream.seq_id, 10, TOKENS))
        deadline = time.monotonic() + 5
        while ("made", STREAMS) not in events and time.monotonic() < deadline:  # bounded
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)
        server.finish_all()
        return events, seen

    return asyncio.run(scenario())


def test_a_large_step_frees_the_loop_until_its_instant_then_writes_from_it():
    events, seen = first_step(cost_ns=400_000)  # 8 writes at 400 us: 3.2 ms, to start precisely
    assert STREAMS * 400_000 >= SPIN_SPAN_NS
    first = events.index(("made", STREAMS))
    assert events[first + 1] == ("loop", 0)  # the loop ran between the making and the first write
    assert events[first + 2 : first + 2 + STREAMS] == [("write", i) for i in range(STREAMS)]
    assert seen["start"] > 0 and seen["begin"] >= seen["start"]  # not before the instant


def test_a_small_step_is_written_as_soon_as_it_is_made():
    events, seen = first_step(cost_ns=10_000)  # 80 us in all
    first = events.index(("made", STREAMS))
    assert events[first + 1 : first + 1 + STREAMS] == [("write", i) for i in range(STREAMS)]
    assert events[first + 1 + STREAMS] == ("loop", 0)  # the loop waited for the writes
    assert seen["start"] == 0


def test_a_stream_cancelled_while_its_step_waits_is_not_written():
    events, _ = first_step(cost_ns=400_000, cancel_one=True)
    first = events.index(("made", STREAMS))
    assert events[first + 1] == ("loop", 0)
    after = events[first + 2 :]
    assert after[: STREAMS - 1] == [("write", i) for i in range(1, STREAMS)]  # all but the cancelled one
    assert ("write", 0) not in after
