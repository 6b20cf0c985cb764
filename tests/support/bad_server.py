"""A small HTTP server that misbehaves on purpose: ``python -m tests.support.bad_server MODE``.

Modes: ``unauthorized`` (401 with an OpenAI-style JSON error that echoes the key), ``cut`` (200 SSE, two tokens,
then the connection is dropped), ``json200`` (200 with a JSON body although a stream was asked for).
Prints ``listening on http://127.0.0.1:PORT/v1`` when ready.
"""

from __future__ import annotations

import asyncio
import sys

TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":" hi"},"finish_reason":null}]}\n\n'


def _response(status: str, content_type: str, body: bytes, chunked: bool = False) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
    if chunked:
        return head.encode() + b"Transfer-Encoding: chunked\r\n\r\n"
    return head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body


async def handle(mode: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            auth = b""
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
                if name.lower() == b"authorization":
                    auth = value.strip()
            await reader.readexactly(length)
            if mode == "unauthorized":
                key = auth.split(b" ", 1)[-1]
                body = (
                    b'{"error": {"message": "Incorrect API key provided: ' + key + b'.", "type": '
                    b'"invalid_request_error", "code": "invalid_api_key"}}'
                )
                writer.write(_response("401 Unauthorized", "application/json", body))
            elif mode == "json200":
                writer.write(_response("200 OK", "application/json", b'{"choices": [{"message": {"content": "x"}}]}'))
            elif mode == "cut":
                writer.write(_response("200 OK", "text/event-stream", b"", chunked=True))
                for _ in range(2):
                    writer.write(b"%x\r\n%s\r\n" % (len(TOKEN), TOKEN))
                    await writer.drain()
                    await asyncio.sleep(0.01)
                writer.transport.abort()
                return
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(mode: str) -> None:
    server = await asyncio.start_server(lambda r, w: handle(mode, r, w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"listening on http://127.0.0.1:{port}/v1", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
