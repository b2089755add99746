"""``BlockingChannel``/``BlockingChannels`` against real sockets on 127.0.0.1: a reply is matched by its opaque
(a broker's own request before it is skipped), a silent peer is a timeout near the deadline, a peer that closes
or sends garbage is a RemotingError, and only a channel whose call succeeded goes back to the pool; the same with
busy-polling for the reply."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from pocketmq.client.blocking_channel import BlockingChannel, BlockingChannels
from pocketmq.errors import ClientError, RemotingError, RemotingTimeoutError
from pocketmq.protocol.command import FrameDecoder, RemotingCommand
from pocketmq.testing.processes import wait_until

pytestmark = pytest.mark.timeout(30)


class Peer:
    """A one-thread TCP peer: for each connection, ``answer(request, conn)`` runs on every request it reads."""

    def __init__(self, answer):
        self._answer = answer
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        with conn:
            while data := conn.recv(65536):
                for request in decoder.feed(data):
                    self._answer(request, conn)

    def close(self) -> None:
        self._listener.close()


def echo_ok(request: RemotingCommand, conn: socket.socket) -> None:
    conn.sendall(request.response(ext_fields={"echo": request.ext_fields.get("n", "")}).encode())


@pytest.mark.parametrize("busy_poll_s", [0.0, 0.001])
def test_replies_come_back_in_order_over_one_reused_channel(busy_poll_s):
    peer = Peer(echo_ok)
    channels = BlockingChannels(connect_timeout_s=1, busy_poll_s=busy_poll_s)
    for n in range(3):
        reply = channels.invoke(peer.address, RemotingCommand.request(10, {"n": n}), timeout_s=2)
        assert reply.ext_fields["echo"] == str(n)
    assert peer.connections == 1
    channels.close()
    peer.close()


def test_a_request_of_the_broker_before_the_reply_is_skipped():
    def request_first(request, conn):
        conn.sendall(RemotingCommand.request(40, {"from": "broker"}).encode() + request.response().encode())

    peer = Peer(request_first)
    channel = BlockingChannel(peer.address, connect_timeout_s=1)
    request = RemotingCommand.request(10)
    reply = channel.invoke(request, timeout_s=2)
    assert reply.is_response and reply.opaque == request.opaque
    channel.close()
    peer.close()


@pytest.mark.parametrize("busy_poll_s", [0.0, 0.05])
def test_a_silent_peer_times_out_near_the_deadline_and_the_channel_is_not_reused(busy_poll_s):
    peer = Peer(lambda request, conn: None)
    channels = BlockingChannels(connect_timeout_s=1, busy_poll_s=busy_poll_s)
    started = time.monotonic()
    with pytest.raises(RemotingTimeoutError):
        channels.invoke(peer.address, RemotingCommand.request(10), timeout_s=0.3)
    assert 0.28 <= time.monotonic() - started < 1.5
    with pytest.raises(RemotingTimeoutError):
        channels.invoke(peer.address, RemotingCommand.request(10), timeout_s=0.1)
    # the timed-out channel was closed: a late reply can't meet the next call
    wait_until(lambda: peer.connections == 2, 5, 0.01, "the second connection")
    channels.close()
    peer.close()


@pytest.mark.parametrize(
    "misbehave, error",
    [
        (lambda request, conn: conn.shutdown(socket.SHUT_RDWR), "closed"),
        (lambda request, conn: conn.sendall(b"\x00\x00\x00\x02xx"), "malformed"),
    ],
)
def test_a_peer_that_closes_or_sends_garbage_is_a_remoting_error(misbehave, error):
    peer = Peer(misbehave)
    with pytest.raises(RemotingError, match=error) as raised:
        BlockingChannels(connect_timeout_s=1).invoke(peer.address, RemotingCommand.request(10), timeout_s=2)
    assert not isinstance(raised.value, RemotingTimeoutError)
    peer.close()


def test_nobody_listening_is_a_remoting_error():
    free = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{free.getsockname()[1]}"
    free.close()
    with pytest.raises(RemotingError, match="cannot connect"):
        BlockingChannels(connect_timeout_s=1).invoke(address, RemotingCommand.request(10), timeout_s=1)


def test_a_timeout_under_the_waits_granularity_still_bounds_the_first_call():
    """A fresh channel sets its kernel wait bound on the first call, however short (a 0 bound waits forever)."""
    peer = Peer(lambda request, conn: None)
    started = time.monotonic()
    with pytest.raises(RemotingTimeoutError):
        BlockingChannels(connect_timeout_s=1).invoke(peer.address, RemotingCommand.request(10), timeout_s=0.005)
    assert time.monotonic() - started < 1.0
    peer.close()


def test_an_idle_channel_the_broker_closed_is_replaced_before_the_next_call():
    closed = threading.Event()

    def answer_then_close(request, conn):
        echo_ok(request, conn)
        conn.shutdown(socket.SHUT_RDWR)  # a broker restarting between two sends
        closed.set()

    peer = Peer(answer_then_close)
    channels = BlockingChannels(connect_timeout_s=1)
    assert channels.invoke(peer.address, RemotingCommand.request(10, {"n": 0}), 2).ext_fields["echo"] == "0"
    assert closed.wait(5)  # the close reached the idle channel (not a close racing the next send: that one fails)
    assert channels.invoke(peer.address, RemotingCommand.request(10, {"n": 1}), 2).ext_fields["echo"] == "1"
    assert peer.connections == 2
    channels.close()
    peer.close()


def test_a_closed_pool_refuses_calls_and_drop_closes_idle_channels():
    peer = Peer(echo_ok)
    channels = BlockingChannels(connect_timeout_s=1)
    channels.invoke(peer.address, RemotingCommand.request(10), 2)
    channels.drop(peer.address)  # the broker left every route
    channels.invoke(peer.address, RemotingCommand.request(10), 2)
    assert peer.connections == 2
    channels.close()
    with pytest.raises(ClientError, match="shut down"):
        channels.invoke(peer.address, RemotingCommand.request(10), 2)
    peer.close()
