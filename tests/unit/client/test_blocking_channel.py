"""``BlockingChannel``/``BlockingChannels`` against real sockets on 127.0.0.1: a reply is matched by its opaque
(a broker's own request before it is skipped), a silent peer is a timeout near the deadline, a peer that closes
or sends garbage is a RemotingError, and only a channel whose call succeeded goes back to the pool; the same with
busy-polling for the reply."""

from __future__ import annotations

import socket
import time

import pytest

from pocketmq.client.blocking_channel import BlockingChannel, BlockingChannels
from pocketmq.common.errors import ClientError, RemotingError, RemotingTimeoutError
from pocketmq.protocol.command import RemotingCommand
from pocketmq.testing.fakes import HANG_UP, FakePeer, hang_up, silent
from pocketmq.testing.polling import wait_until

pytestmark = pytest.mark.timeout(30)


def echo_ok(request: RemotingCommand) -> RemotingCommand:
    return request.response(ext_fields={"echo": request.ext_fields.get("n", "")})


@pytest.mark.parametrize("busy_poll_s", [0.0, 0.001])
def test_replies_come_back_in_order_over_one_reused_channel(busy_poll_s):
    with FakePeer(echo_ok).in_thread() as peer:
        channels = BlockingChannels(connect_timeout_s=1, busy_poll_s=busy_poll_s)
        for n in range(3):
            reply = channels.invoke(peer.addr, RemotingCommand.request(10, {"n": n}), timeout_s=2)
            assert reply.ext_fields["echo"] == str(n)
        assert peer.connections == 1
        channels.close()


def test_a_request_of_the_broker_before_the_reply_is_skipped():
    def request_first(request):
        return [RemotingCommand.request(40, {"from": "broker"}), request.response()]

    with FakePeer(request_first).in_thread() as peer:
        channel = BlockingChannel(peer.addr, connect_timeout_s=1)
        request = RemotingCommand.request(10)
        reply = channel.invoke(request, timeout_s=2)
        assert reply.is_response and reply.opaque == request.opaque
        channel.close()


@pytest.mark.parametrize("busy_poll_s", [0.0, 0.05])
def test_a_silent_peer_times_out_near_the_deadline_and_the_channel_is_not_reused(busy_poll_s):
    with FakePeer(silent).in_thread() as peer:
        channels = BlockingChannels(connect_timeout_s=1, busy_poll_s=busy_poll_s)
        started = time.monotonic()
        with pytest.raises(RemotingTimeoutError):
            channels.invoke(peer.addr, RemotingCommand.request(10), timeout_s=0.3)
        assert 0.28 <= time.monotonic() - started < 1.5
        with pytest.raises(RemotingTimeoutError):
            channels.invoke(peer.addr, RemotingCommand.request(10), timeout_s=0.1)
        # the timed-out channel was closed: a late reply can't meet the next call
        wait_until(lambda: peer.connections == 2, 5, "the second connection", interval_s=0.01)
        channels.close()


@pytest.mark.parametrize(
    "misbehave, error",
    [(hang_up, "closed"), (lambda request: b"\x00\x00\x00\x02xx", "malformed")],
)
def test_a_peer_that_closes_or_sends_garbage_is_a_remoting_error(misbehave, error):
    with FakePeer(misbehave).in_thread() as peer:
        with pytest.raises(RemotingError, match=error) as raised:
            BlockingChannels(connect_timeout_s=1).invoke(peer.addr, RemotingCommand.request(10), timeout_s=2)
        assert not isinstance(raised.value, RemotingTimeoutError)


def test_nobody_listening_is_a_remoting_error():
    free = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{free.getsockname()[1]}"
    free.close()
    with pytest.raises(RemotingError, match="cannot connect"):
        BlockingChannels(connect_timeout_s=1).invoke(address, RemotingCommand.request(10), timeout_s=1)


def test_a_timeout_under_the_waits_granularity_still_bounds_the_first_call():
    """A fresh channel sets its kernel wait bound on the first call, however short (a 0 bound waits forever)."""
    with FakePeer(silent).in_thread() as peer:
        started = time.monotonic()
        with pytest.raises(RemotingTimeoutError):
            BlockingChannels(connect_timeout_s=1).invoke(peer.addr, RemotingCommand.request(10), timeout_s=0.005)
        assert time.monotonic() - started < 1.0


def test_an_idle_channel_the_broker_closed_is_replaced_before_the_next_call():
    def answer_then_close(request):
        return [echo_ok(request), HANG_UP]  # a broker restarting between two sends

    with FakePeer(answer_then_close).in_thread() as peer:
        channels = BlockingChannels(connect_timeout_s=1)
        assert channels.invoke(peer.addr, RemotingCommand.request(10, {"n": 0}), 2).ext_fields["echo"] == "0"
        # the close reached the idle channel (not a close racing the next send: that one fails)
        wait_until(lambda: peer.open_connections == 0, 5, "the peer closing the connection")
        assert channels.invoke(peer.addr, RemotingCommand.request(10, {"n": 1}), 2).ext_fields["echo"] == "1"
        assert peer.connections == 2
        channels.close()


def test_a_closed_pool_refuses_calls_and_drop_closes_idle_channels():
    with FakePeer(echo_ok).in_thread() as peer:
        channels = BlockingChannels(connect_timeout_s=1)
        channels.invoke(peer.addr, RemotingCommand.request(10), 2)
        channels.drop(peer.addr)  # the broker left every route
        channels.invoke(peer.addr, RemotingCommand.request(10), 2)
        assert peer.connections == 2
        channels.close()
        with pytest.raises(ClientError, match="shut down"):
            channels.invoke(peer.addr, RemotingCommand.request(10), 2)
