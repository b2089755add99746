"""Typed remote reads: each PULL answer and each failure classified; slaves tried when the master fails;
the breaker makes reads of a dead group fail fast."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.cluster.breaker import BreakerBoard, BreakerSettings, BreakerState
from pocketmq.cluster.remote_reader import (
    RemoteMessageReader,
    classify_error,
    classify_pull_reply,
)
from pocketmq.common.errors import (
    RemotingError,
    RemotingTimeoutError,
)
from pocketmq.common.message import MessageExt
from pocketmq.common.read_result import FailureReason, NotFoundCause, ReadStatus
from pocketmq.common.record import encode_record
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.runtime.clock import ManualClock
from pocketmq.testing.fakes import FakeNameServer, FakePeer, answer, canned, hang_up, silent
from pocketmq.testing.polling import eventually

PULL = RemotingCommand.request(RequestCode.PULL_MESSAGE, {})


def reply(code: int, *offsets: int, min_offset: int = 0, max_offset: int = 10) -> RemotingCommand:
    body = b"".join(encode_record(MessageExt(topic="t", body=b"m%d" % o, queue_offset=o)) for o in offsets)
    return PULL.response(code, {"minOffset": min_offset, "maxOffset": max_offset}, body=body)


def test_found_and_missing_offsets_of_one_reply():
    results = classify_pull_reply(reply(ResponseCode.SUCCESS, 3, 4, min_offset=2), [1, 3, 4, 12], from_slave=False)
    assert results[3].status is ReadStatus.FOUND and results[3].message.body == b"m3"
    assert results[1].not_found_cause is NotFoundCause.BELOW_MIN_OFFSET
    assert results[12].not_found_cause is NotFoundCause.BEYOND_MAX_OFFSET


@pytest.mark.parametrize("code", [ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED])
def test_no_record_codes_use_the_queue_bounds(code):
    assert (
        classify_pull_reply(reply(code, min_offset=5), [2], from_slave=False)[2].not_found_cause
        is NotFoundCause.BELOW_MIN_OFFSET
    )
    lagging = classify_pull_reply(reply(code, max_offset=5), [7], from_slave=True)[7]
    assert lagging.failure is FailureReason.GROUP_UNREACHABLE and lagging.need_retry  # a slave may lag


@pytest.mark.parametrize(
    "code, expected",
    [
        (ResponseCode.NO_PERMISSION, FailureReason.NO_PERMISSION),
        (ResponseCode.SYSTEM_BUSY, FailureReason.BROKER_BUSY),
        (ResponseCode.SERVICE_NOT_AVAILABLE, FailureReason.BROKER_BUSY),
        (ResponseCode.SYSTEM_ERROR, FailureReason.EXCEPTION),
    ],
)
def test_refusals_are_failed_reads_to_retry(code, expected):
    result = classify_pull_reply(PULL.response(code, remark="no"), [0], from_slave=False)[0]
    assert (result.failure, result.need_retry, result.code) == (expected, True, code)
    assert result.retry_delay_ms > 0


def test_topic_not_exist_is_gone_for_good_from_a_master_only():
    result = classify_pull_reply(PULL.response(ResponseCode.TOPIC_NOT_EXIST), [0], from_slave=False)[0]
    assert result.not_found_cause is NotFoundCause.TOPIC_GONE and not result.need_retry
    # A slave's metadata may trail its master's: "not yet", never "gone" (revive must not drop the message).
    not_yet = classify_pull_reply(PULL.response(ResponseCode.TOPIC_NOT_EXIST), [0, 1], from_slave=True)
    assert {r.status for r in not_yet.values()} == {ReadStatus.FAILED}
    assert all(
        r.failure is FailureReason.GROUP_UNREACHABLE and r.need_retry and r.retry_delay_ms > 0 for r in not_yet.values()
    )


async def test_a_slave_that_does_not_know_the_topic_keeps_the_read_for_later(remoting, peers):
    slave = await peers(answer(ResponseCode.TOPIC_NOT_EXIST, "no topic"))
    r, _ = reader(remoting, {1: slave})
    result = await r.read("t", 0, 4)
    assert (result.status, result.failure, result.need_retry) == (
        ReadStatus.FAILED,
        FailureReason.GROUP_UNREACHABLE,
        True,
    )
    assert len(slave.requests) == 1


def test_call_errors():
    assert classify_error(RemotingTimeoutError("late")).failure is FailureReason.TIMEOUT
    assert classify_error(RemotingError("cannot connect")).failure is FailureReason.CONNECTION_REFUSED
    assert classify_error(KeyError("x")).failure is FailureReason.EXCEPTION


def reader(remoting, group: dict[int, FakePeer] | None, clock=None, threshold=2, timeout_ms=3_000):
    """A reader of group "b", whose members (broker id -> peer) the name server lists (None: it is down)."""
    names = FakeNameServer()
    if group is None:
        names.down = True
    elif group:
        names.group("b", {broker_id: peer.addr for broker_id, peer in group.items()})
    board = BreakerBoard(BreakerSettings(failure_threshold=threshold, cool_down_ms=1000))
    read = RemoteMessageReader(
        "b", names, remoting, breakers=board, clock=clock or ManualClock(), timeout_ms=timeout_ms
    )
    return read, board


async def test_reads_the_master_and_falls_back_to_a_slave(remoting, peers):
    master, slave = await peers(hang_up), await peers(canned(reply(0, 4)))
    r, _ = reader(remoting, {0: master, 1: slave})
    result = await r.read("t", 0, 4)
    assert result.status is ReadStatus.FOUND and [len(master.requests), len(slave.requests)] == [1, 1]


async def test_a_whole_group_down_and_an_unknown_group(remoting, peers):
    master, slave = await peers(hang_up), await peers(silent)
    r, _ = reader(remoting, {0: master, 1: slave}, timeout_ms=100)
    down = await r.read("t", 0, 4)
    assert down.failure is FailureReason.GROUP_UNREACHABLE
    assert f"{master.addr}: CONNECTION_REFUSED" in down.description and f"{slave.addr}: TIMEOUT" in down.description
    assert (await reader(remoting, {})[0].read("t", 0, 1)).failure is FailureReason.BROKER_ADDR_UNKNOWN
    assert (await reader(remoting, None)[0].read("t", 0, 1)).failure is FailureReason.BROKER_ADDR_UNKNOWN


async def test_breaker_opens_fails_fast_with_the_cool_down_and_closes_after_a_good_probe(remoting, peers):
    clock = ManualClock()
    master = await peers(hang_up)
    r, board = reader(remoting, {0: master}, clock)
    assert (await r.read("t", 0, 1)).failure is FailureReason.CONNECTION_REFUSED
    await r.read("t", 0, 1)
    assert board.get("b").state is BreakerState.OPEN
    clock.advance(400)
    fast = await r.read("t", 0, 1)
    assert (fast.failure, fast.retry_delay_ms, len(master.requests)) == (FailureReason.BREAKER_OPEN, 600, 2)
    clock.advance(600)
    master.on(RequestCode.PULL_MESSAGE, canned(reply(0, 1)))
    assert (await r.read("t", 0, 1)).status is ReadStatus.FOUND
    assert board.get("b").state is BreakerState.CLOSED


async def test_a_cancelled_probe_lets_the_next_read_probe(remoting, peers):
    clock = ManualClock()
    master = await peers(hang_up)
    r, board = reader(remoting, {0: master}, clock, timeout_ms=60_000)
    await r.read("t", 0, 1)
    await r.read("t", 0, 1)
    clock.advance(1000)
    master.on(RequestCode.PULL_MESSAGE, silent)  # the probe hangs until its pass is stopped
    probe = asyncio.create_task(r.read("t", 0, 1))
    await eventually(lambda: len(master.requests) == 3, timeout_s=5)
    assert board.get("b").state is BreakerState.HALF_OPEN
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    master.on(RequestCode.PULL_MESSAGE, canned(reply(0, 1)))
    assert (await r.read("t", 0, 1)).status is ReadStatus.FOUND  # not BREAKER_OPEN for good
    assert board.get("b").state is BreakerState.CLOSED


async def test_a_cancelled_read_does_not_release_another_reads_probe(remoting, peers):
    clock = ManualClock()
    master = await peers(silent)
    r, board = reader(remoting, {0: master}, clock, timeout_ms=60_000)
    slow = asyncio.create_task(r.read("t", 0, 1))  # admitted while CLOSED
    await eventually(lambda: len(master.requests) == 1, timeout_s=5)
    breaker = board.get("b")
    for now_ms in range(2):
        breaker.record_failure(now_ms)
    assert breaker.admit(1001) and breaker.state is BreakerState.HALF_OPEN  # another read's probe is out
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    assert not breaker.admit(1002)  # still that probe's turn


async def test_many_offsets_of_a_queue_in_one_rpc(remoting, peers):
    master = await peers(canned(reply(0, 5, 6, 8)))
    r, _ = reader(remoting, {0: master})
    results = await r.read_many("t", 0, [8, 5, 6, 7])
    assert [results[o].status for o in (5, 6, 8)] == [ReadStatus.FOUND] * 3
    assert results[7].failure is FailureReason.OFFSET_MISMATCH and len(master.requests) == 1
