"""Call timeouts of ``RemotingConnection`` (one sweeping timer per connection, not one per call), over a real
socket: a call the peer never answers fails within a sweep of its deadline, while the answered calls beside it
succeed and a later call starts the sweeping again."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.common.errors import RemotingTimeoutError
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.transport import TIMEOUT_SWEEP_S, RemotingClient
from pocketmq.testing.fakes import FakePeer, answer, silent

pytestmark = pytest.mark.timeout(10)
SILENT_CODE = 999


async def test_an_unanswered_call_times_out_within_a_sweep_and_answered_calls_beside_it_succeed():
    client = RemotingClient()
    async with FakePeer(answer()).on(SILENT_CODE, silent) as peer:
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            unanswered = asyncio.ensure_future(
                client.invoke(peer.addr, RemotingCommand.request(SILENT_CODE), timeout_s=0.2)
            )
            answered = await asyncio.gather(
                *(client.invoke(peer.addr, RemotingCommand.request(10), 2) for _ in range(5))
            )
            assert all(reply.is_response for reply in answered)
            with pytest.raises(RemotingTimeoutError):
                await unanswered
            assert 0.2 <= loop.time() - started < 0.2 + TIMEOUT_SWEEP_S + 0.5
            # nothing pending any more: the sweeper stopped; the next unanswered call restarts it
            with pytest.raises(RemotingTimeoutError):
                await client.invoke(peer.addr, RemotingCommand.request(SILENT_CODE), timeout_s=0.1)
            assert (await client.invoke(peer.addr, RemotingCommand.request(10), 2)).is_response
            # with only long calls pending (a long poll, say) the timer waits for a deadline: no sweep every 50 ms
            long_call = asyncio.ensure_future(client.invoke(peer.addr, RemotingCommand.request(SILENT_CODE), 30))
            await asyncio.sleep(0)
            connection = await client.connection(peer.addr)
            assert connection._sweep_at - loop.time() > 1
            long_call.cancel()
        finally:
            await client.close()


async def test_a_chained_call_gets_its_reply_or_its_timeout_without_a_coroutine():
    """``request_now`` sends on an open connection and returns the reply's future (None before one is open);
    ``reply`` reads it, or raises the timeout ``invoke`` would, and the timed-out call is no longer pending."""
    client = RemotingClient()
    async with FakePeer(answer()).on(SILENT_CODE, silent) as peer:
        try:
            assert client.request_now(peer.addr, RemotingCommand.request(10), 2) is None  # not connected yet
            connection = await client.connection(peer.addr)
            request = RemotingCommand.request(10)
            answered = client.request_now(peer.addr, request, 2)
            assert answered is not None
            await asyncio.wait([answered], timeout=2)
            assert client.reply(peer.addr, answered, request, 2).is_response
            unanswered_request = RemotingCommand.request(SILENT_CODE)
            unanswered = client.request_now(peer.addr, unanswered_request, 0.1)
            assert unanswered is not None
            await asyncio.wait([unanswered], timeout=2)
            with pytest.raises(RemotingTimeoutError):
                client.reply(peer.addr, unanswered, unanswered_request, 0.1)
            assert "pending=0" in repr(connection)
        finally:
            await client.close()
