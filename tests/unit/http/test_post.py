"""``wire.post`` against ``HTTPClient.request``, over real loopback sockets: the same response for every kind of
answer, the body's unparsed bytes only for a chunked 200 event stream, the connection pooled as before."""

import gevent
import gevent.event
import gevent.select
import geventhttpclient.connectionpool
import pytest
from gevent.server import StreamServer
from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError

import locust_llm.http.post as wire
from locust_llm.http.post import post

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
CHUNKS = b"5\r\nhello\r\n0\r\n\r\n"


class Server:
    """Answers each request with ``answers[i]``: a list of byte pieces written 2 ms apart (``None``: close)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests: list[bytes] = []
        self.connections = 0
        self.sockets: list = []  # the server's end of each connection
        self.closed = gevent.event.Event()  # set when the server closed a connection
        self.server = StreamServer(("127.0.0.1", 0), self.handle)
        self.server.start()

    def handle(self, sock, _address):
        self.connections += 1
        self.sockets.append(sock)
        data = b""
        while self.answers:
            while b"\r\n\r\n" not in data:
                more = sock.recv(65536)
                if not more:
                    return
                data += more
            head, _, data = data.partition(b"\r\n\r\n")
            length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
            while len(data) < length:
                data += sock.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + data[:length])
            data = data[length:]
            for piece in self.answers.pop(0):
                if piece is None:
                    sock.close()
                    self.closed.set()
                    return
                sock.sendall(piece)
                gevent.sleep(0.002)

    def client(self) -> HTTPClient:
        return HTTPClient("127.0.0.1", self.server.server_port, network_timeout=5, connection_timeout=5)

    def close(self):
        self.server.stop()


@pytest.fixture
def serve():
    servers = []

    def make(*answers):
        servers.append(Server(*answers))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def read_all(send):
    """What a request sent by ``send`` comes back as: (status, headers, body, unparsed?) or the exception raised."""
    try:
        opened = send()
        if not isinstance(opened, wire.ResponseStart):
            opened = wire.ResponseStart(opened, None)
        if opened.body:
            opened.response.feed(opened.body)  # what the Unchunker does, in the end (test_chunked.py)
        response = opened.response
        return response.status_code, list(response.items()), response.read(), opened.body is not None
    except Exception as exc:  # compared, type and text
        return type(exc), exc.args


def both(serve, answer):
    """The same answer through ``post`` and through ``HTTPClient.request``: what ``post`` gave, and the server."""
    server = serve(answer, answer)
    http = server.client()
    headers = {"Content-Type": "application/json"}
    try:
        ours = read_all(lambda: post(http, "/v1/chat/completions", b'{"a": 1}', headers))
        theirs = read_all(lambda: http.request("POST", "/v1/chat/completions", body=b'{"a": 1}', headers=headers))
    finally:
        http.close()
    assert ours[:-1] == theirs[:-1]
    sent = [request.split(b"\r\n") for request in server.requests]
    assert sent[0][0] == sent[1][0] and sorted(sent[0]) == sorted(sent[1])  # the same request, headers reordered
    return ours, server


def test_a_chunked_event_stream_comes_back_with_the_bytes_after_its_head(serve):
    server = serve([SSE_HEAD + CHUNKS[:4], CHUNKS[4:]])
    http = server.client()
    try:
        opened = post(http, "/v1/chat/completions", b"{}", {})
        assert opened.body == CHUNKS[:4]
        assert not opened.response._body_buffer and not opened.response.message_complete
        opened.response.release()
    finally:
        http.close()
    both(serve, [SSE_HEAD + CHUNKS[:4], CHUNKS[4:]])


def test_a_head_alone_leaves_no_body_bytes(serve):
    server = serve([SSE_HEAD, CHUNKS])
    http = server.client()
    try:
        opened = post(http, "/v1/chat/completions", b"{}", {})
        assert opened.body == b"" and opened.response.status_code == 200
    finally:
        http.close()


@pytest.mark.parametrize(
    "answer, unparsed",
    [
        ([b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 4\r\n\r\nslow"], False),
        ([b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"], False),
        ([b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + CHUNKS], False),
        ([b"HTTP/1.1 100 Continue\r\n\r\n", SSE_HEAD + CHUNKS], False),  # an interim answer first
        ([b"HTTP/1.1 200 OK\nContent-Type: text/event-stream\nTransfer-Encoding: chunked\n\n" + CHUNKS], None),
        ([SSE_HEAD[:20], SSE_HEAD[20:] + CHUNKS], True),  # the head in two pieces
        ([SSE_HEAD + CHUNKS], True),
    ],
)
def test_every_answer_reads_as_request_reads_it_and_only_a_chunked_event_stream_is_left_unparsed(
    serve, answer, unparsed
):
    ours, _ = both(serve, answer)
    if unparsed is None:  # the parser refuses it, through both
        assert ours[0] is HTTPParseError
    else:
        assert ours[-1] is unparsed


def test_a_connection_closed_before_any_byte_is_closed_and_its_pool_slot_freed(serve):
    server = serve([None], [SSE_HEAD + CHUNKS])
    http = server.client()
    try:
        with pytest.raises(HTTPConnectionClosed):
            post(http, "/v1/chat/completions", b"{}", {})
        opened = post(http, "/v1/chat/completions", b"{}", {})  # a fresh connection: the pool gave its slot back
        assert opened.response.status_code == 200
    finally:
        http.close()
    assert server.connections == 2


def test_a_completed_body_gives_the_connection_back_for_the_next_request(serve):
    server = serve([SSE_HEAD + CHUNKS], [SSE_HEAD + CHUNKS])
    http = server.client()
    try:
        for _ in range(2):
            opened = post(http, "/v1/chat/completions", b"{}", {})
            opened.response.feed(opened.body)
            assert opened.response.read() == b"hello" and opened.response.message_complete
            opened.response.release()
    finally:
        http.close()
    assert server.connections == 1


def test_the_head_is_built_once_per_client_uri_and_headers(serve, monkeypatch):
    server = serve(*[[SSE_HEAD + CHUNKS]] * 5)
    http = server.client()
    built = []
    real = http._build_request
    monkeypatch.setattr(http, "_build_request", lambda *a, **k: built.append(a) or real(*a, **k))
    headers = {"X-Run": "1"}
    try:
        for body in (b"{}", b'{"longer": true}'):
            post(http, "/v1/chat/completions", body, headers).response.release()
        post(http, "/v1/chat/completions", b"{}", {"X-Run": "2"}).response.release()
        headers["X-Run"] = "3"  # the same dict, changed: a new head
        post(http, "/v1/chat/completions", b"{}", headers).response.release()
        post(http, "/v1/chat/completions", b"{}", {"X-Run": "1"}).response.release()  # equal to the first: kept
    finally:
        http.close()
    assert len(built) == 3
    assert [int(r.split(b"ontent-Length: ")[1].split(b"\r\n")[0]) for r in server.requests] == [2, 16, 2, 2, 2]
    assert server.requests[0].endswith(b"\r\n\r\n{}") and b"X-Run: 1" in server.requests[0]
    assert [r.split(b"X-Run: ")[1][:1] for r in server.requests] == [b"1", b"1", b"2", b"3", b"1"]


def test_proxies_and_send_changing_headers_go_through_request(monkeypatch):
    sent = []
    monkeypatch.setattr(HTTPClient, "request", lambda self, *a, **k: sent.append(k["headers"]) or "theirs")
    plain = HTTPClient("127.0.0.1", 9, connection_timeout=1)
    assert wire._own_path(HTTPClient("127.0.0.1", 9, ssl=True, connection_timeout=1), {})  # TLS: ours (test_pump)
    for http, headers in [
        (HTTPClient("127.0.0.1", 9, proxy_host="127.0.0.1", proxy_port=8, connection_timeout=1), {}),
        (plain, {"Expect": "100-continue"}),
        (plain, {"transfer-encoding": "chunked"}),
        (plain, {"Content-Length": "2"}),
    ]:
        assert post(http, "/x", b"{}", headers) == wire.ResponseStart("theirs", None)
    assert len(sent) == 4


def read_one(http):
    opened = post(http, "/v1/chat/completions", b"{}", {})
    opened.response.feed(opened.body)
    assert opened.response.read() == b"hello"
    opened.response.release()


def test_a_kept_alive_connection_is_taken_from_the_pool_without_a_yield(serve, monkeypatch):
    monkeypatch.setattr(geventhttpclient.connectionpool, "select", gevent.select)  # as monkey-patched in Locust
    server = serve([SSE_HEAD + CHUNKS], [SSE_HEAD + CHUNKS])
    http = server.client()
    try:
        read_one(http)  # the pool now judges its idle sockets by wire's check
        pool = http._connection_pool
        ran = []
        gevent.spawn(ran.append, "other greenlet")  # runs at the first yield to the hub
        sock = pool.get_socket()
        assert ran == []  # the pool's select-based check yields (gevent.select.select with timeout 0 sleeps)
        pool.return_socket(sock)
        read_one(http)
        assert ran == ["other greenlet"]
    finally:
        http.close()
    assert server.connections == 1  # the idle connection was judged alive and reused


def test_a_connection_its_server_closed_while_idle_is_not_reused(serve):
    server = serve([SSE_HEAD + CHUNKS, None], [SSE_HEAD + CHUNKS])
    http = server.client()
    try:
        read_one(http)
        assert server.closed.wait(5)  # closed: on loopback its end of file is already in the client's socket
        read_one(http)  # on a fresh connection, not a failure
    finally:
        http.close()
    assert server.connections == 2


def test_a_connection_holding_bytes_nobody_asked_for_is_not_reused(serve):
    server = serve([SSE_HEAD + CHUNKS], [SSE_HEAD + CHUNKS], [SSE_HEAD + CHUNKS])
    http = server.client()
    try:
        read_one(http)
        server.sockets[0].sendall(b"HTTP/1.1 408 Request Timeout\r\n\r\n")  # an idle connection's stray answer
        read_one(http)
        read_one(http)  # the fresh connection is kept alive as before
    finally:
        http.close()
    assert server.connections == 2


def test_a_tls_socket_is_judged_by_the_pools_own_check():
    assert wire._idle_and_open(lambda sock: sock == "tls socket", "tls socket") is True
    assert wire._idle_and_open(lambda sock: False, None) is False


@pytest.mark.parametrize("network_timeout", [None, 30.0], ids=["waited on the loop", "read with a socket timeout"])
@pytest.mark.parametrize("interrupt", ["deadline", "stop"])
def test_a_request_whose_head_never_came_closes_its_connection_and_frees_its_pool_slot(network_timeout, interrupt):
    """The request's deadline, or a Locust stop (which kills the user's greenlet), while its head is awaited: the
    connection is closed and its pool slot freed. They were not: after ``concurrency`` such requests every later one
    of that user waited for a slot until its own deadline and was reported as a timeout "before any response",
    without reaching the server (a slow server's knee would have read as a wall of timeouts)."""
    from locust_llm.http.stream import run_stream
    from locust_llm.protocol.metrics import Outcome

    stalled = []

    def handle(sock, _address):
        sock.recv(65536)
        stalled.append(sock)
        gevent.sleep(5)

    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    http = HTTPClient(
        "127.0.0.1", server.server_port, network_timeout=network_timeout, connection_timeout=5, concurrency=2
    )
    try:
        for n in range(1, 4):
            if interrupt == "deadline":
                result = run_stream(http, "/v1/chat/completions", b"{}", {}, model="m", timeout_s=0.2, intended_ns=0)
                assert result.outcome is Outcome.TIMEOUT
            else:
                user = gevent.spawn(
                    run_stream, http, "/v1/chat/completions", b"{}", {}, model="m", timeout_s=5, intended_ns=0
                )
                with gevent.Timeout(5):
                    while len(stalled) < n:
                        gevent.sleep(0.01)
                user.kill()
            assert len(stalled) == n  # every request reached the server
            assert http._connection_pool._semaphore.counter == 2  # both slots free
            assert stalled[-1].recv(1) == b""  # and the client closed the connection
    finally:
        http.close()
        server.stop()


def test_a_request_whose_body_could_not_be_sent_by_its_deadline_frees_its_pool_slot():
    """A server that reads nothing: the request's body (larger than the sockets' buffers) is still being sent when
    the deadline ends the request; its connection is closed and its slot freed."""
    from locust_llm.http.stream import run_stream
    from locust_llm.protocol.metrics import Outcome

    accepted = []

    def handle(sock, _address):
        accepted.append(sock)
        gevent.sleep(5)

    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    http = HTTPClient("127.0.0.1", server.server_port, network_timeout=None, connection_timeout=5, concurrency=1)
    try:
        for n in range(1, 3):
            result = run_stream(
                http, "/v1/chat/completions", b"x" * (64 << 20), {}, model="m", timeout_s=0.3, intended_ns=0
            )
            assert result.outcome is Outcome.TIMEOUT
            assert len(accepted) == n and http._connection_pool._semaphore.counter == 1
    finally:
        http.close()
        server.stop()
