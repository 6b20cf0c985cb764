"""What the simulator's HTTP front writes per streamed answer: the head with the role chunk in one write, then one
write per token, then the terminating chunk (in-process, over a real loopback socket)."""

import asyncio
import json

from aiohttp import web

from locust_llm.sim.engine import PacingParams
from locust_llm.sim.presets import ModelSpec, SimConfig
from locust_llm.sim.server import SimServer

TOKENS = 4


def test_the_head_leaves_with_the_role_chunk_and_each_token_alone(monkeypatch):
    writes: dict[int, list[bytes]] = {}
    transport_class = asyncio.selector_events._SelectorSocketTransport  # the default loop's TCP transport
    write = transport_class.write

    def counted(self, data):
        writes.setdefault(id(self), []).append(bytes(data))
        write(self, data)

    def counted_lines(self, chunks):
        counted(self, b"".join(chunks))  # one write of them all, as the transport makes

    monkeypatch.setattr(transport_class, "write", counted)
    monkeypatch.setattr(transport_class, "writelines", counted_lines)
    body = json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": TOKENS, "stream": True}
    ).encode()

    async def exchange() -> bytes:
        spec = ModelSpec("m", engine="pacing", pacing=PacingParams(ttft_ms=5, itl_ms=1, capacity=4))
        server = SimServer(SimConfig(models=(spec,)))
        runner = web.AppRunner(server.app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            port = runner.addresses[0][1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
            )
            received = b""
            while not received.endswith(b"\r\n0\r\n\r\n"):
                received += await asyncio.wait_for(reader.read(65536), 10)
            writer.close()
            return received
        finally:
            server.finish_all()
            await runner.cleanup()

    received = asyncio.run(exchange())
    (answer,) = [w for w in writes.values() if w[0].startswith(b"HTTP/1.1 200")]
    assert b"".join(answer) == received
    assert b'"role":"assistant"' in answer[0]  # the head and the role chunk: one write
    assert len(answer) == 1 + TOKENS + 1  # then a write per token (the last with the finish chunk), the end
    assert answer[-1] == b"0\r\n\r\n"


def test_a_step_makes_every_chunk_before_its_first_write_and_stamps_each_write(monkeypatch):
    """The writes of a step span as little time as they can (``Replica._write``): no token is formatted between two
    writes, and each stream's delivered time is its own write's stamp, within the writes' span."""
    import locust_llm.sim.replicas as runtime_module
    from locust_llm.sim.response import Stream

    order: list[tuple[str, int]] = []

    class Transport:
        def __init__(self, seq_id: int) -> None:
            self.seq_id = seq_id
            self.chunks: list[bytes] = []

        def is_closing(self) -> bool:
            return False

        def write(self, chunk: bytes) -> None:
            order.append(("write", self.seq_id))
            self.chunks.append(chunk)

    made = runtime_module.token_id

    def token_id(seed: int, seq_id: int, index: int) -> int:
        order.append(("made", seq_id))
        return made(seed, seq_id, index)

    monkeypatch.setattr(runtime_module, "token_id", token_id)
    spec = ModelSpec("m", engine="pacing", pacing=PacingParams(ttft_ms=5, itl_ms=1, capacity=8))
    replica = SimServer(SimConfig(models=(spec,))).models["m"].replicas[0]
    loop = asyncio.new_event_loop()
    try:
        transports = {seq_id: Transport(seq_id) for seq_id in (1, 2, 3)}
        streams = {
            seq_id: Stream(seq_id, "m", 10, 8, t, True, loop.create_future(), taken_ns=0)
            for seq_id, t in transports.items()
        }
        replica.streams.update(streams)
        due = 1_000
        made = replica._make([(seq_id, 1, due, False) for seq_id in (1, 2, 3)], due)
        begin, end = replica._write(made)
    finally:
        loop.close()
    assert order == [("made", 1), ("made", 2), ("made", 3), ("write", 1), ("write", 2), ("write", 3)]
    assert len(made.taken) == 3 and begin <= end
    stamps = [streams[seq_id].sent_ns for seq_id in (1, 2, 3)]
    assert begin <= stamps[0] <= stamps[1] <= stamps[2] == end  # each stream's own write, in the step's order
    for transport in transports.values():
        (chunk,) = transport.chunks
        size, _, payload = chunk.partition(b"\r\n")
        assert int(size, 16) == len(payload) - 2 and b'"content":' in payload  # one framed token chunk each
