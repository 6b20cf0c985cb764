"""What the simulator's HTTP front writes per streamed answer: the head with the role chunk in one write, then one
write per token, then the terminating chunk (in-process, over a real loopback socket)."""

import asyncio
import json

from aiohttp import web

from locust_llm.sim.config import ModelSpec, SimConfig
from locust_llm.sim.engine import PacingParams
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
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": TOKENS,
                       "stream": True}).encode()  # fmt: skip

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
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%b" % (len(body), body))  # fmt: skip
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
