"""A pooled socket handed on while its last waiter has not yet resumed: the new owner's wait is its own.

The pump hands back at the end of a body from inside the hub's read callback, where the response returns its socket
to the pool; the user's greenlet resumes later in the same turn or the next (its wake-up is queued). An open-loop
arrival that runs in between takes that socket and waits on the socket's own read watcher. The first waiter, when it
resumes, must not stop that watcher: it did, and the new request then slept forever with its answer in the socket
(CI: a request of an open-loop run that never returned, counted in flight to the end)."""

import gevent
import gevent.socket
from gevent.hub import Waiter, get_hub

from locust_llm.http.pump import wait_readable


def test_a_socket_taken_by_a_new_waiter_before_the_old_one_resumed_wakes_the_new_one():
    mine, peer = gevent.socket.socketpair()
    loop = get_hub().loop
    woke: list[str] = []
    taken: list[bool] = []
    handed = Waiter()

    def first() -> None:
        wait_readable(mine)
        woke.append("first")

    def second() -> None:
        handed.get()  # switched to by the check watcher below: after first's wake-up was queued, before it ran
        wait_readable(mine)
        woke.append("second")

    def hand_on() -> None:
        # in the turn where the socket became readable: first's watcher has run (stopped, wake-up queued), and
        # first has not resumed; the socket's next owner starts its wait now, on the same watcher
        if mine._read_event.callback is None and not woke and handed.greenlet is not None:
            handed.switch(None)
            taken.append(mine._read_event.callback is not None)  # second sleeps on the socket's own watcher

    # a check watcher runs in the same turn as the read callbacks, after them at the lowest priority
    check = loop.check(ref=False, priority=loop.MINPRI)
    check.start(hand_on)
    try:
        one, two = gevent.spawn(first), gevent.spawn(second)
        gevent.sleep(0.01)  # both wait: first on the socket, second to be handed it
        assert not woke and mine._read_event.callback is not None  # first waits on the socket's own watcher
        peer.sendall(b"answer")
        gevent.joinall([one, two], timeout=2)
        assert taken == [True]  # the case arose: the new owner waits on the watcher the first one had
        # the answer is still unread: the new owner's wait returns at the next turn
        assert woke == ["first", "second"], woke
    finally:
        check.stop()
        gevent.killall([one, two])
        mine.close()
        peer.close()
