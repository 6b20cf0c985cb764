"""A minimal HTTP CONNECT proxy on 127.0.0.1 (threads; bounded): it records each tunnel's target and relays bytes.

Only for tests: it refuses anything but CONNECT, and only to 127.0.0.1.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class ConnectProxy:
    def __init__(self) -> None:
        self.tunnels: list[str] = []  # "host:port" of each CONNECT, in order
        self.auth: list[str] = []  # the Proxy-Authorization header of each CONNECT ("" when none)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 8192:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            host, _, port = target.rpartition(":")
            if method != "CONNECT" or host != "127.0.0.1":
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            self.tunnels.append(target)
            headers = head.decode("latin-1").split("\r\n")[1:]
            self.auth.append(
                next((h.split(":", 1)[1].strip() for h in headers if h.lower().startswith("proxy-authorization:")), "")
            )
            with socket.create_connection((host, int(port)), timeout=30) as upstream:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                threading.Thread(target=_relay, args=(upstream, client), daemon=True).start()
                _relay(client, upstream)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()


def _relay(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@contextmanager
def connect_proxy() -> Iterator[ConnectProxy]:
    proxy = ConnectProxy()
    try:
        yield proxy
    finally:
        proxy.close()
