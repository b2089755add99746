"""CK / ACK records, receipt handles and the CK rewrite policy: pure, in virtual time."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.pop.receipt import InvalidReceiptHandle, ReceiptHandle
from pocketmq.broker.pop.rewrite import (
    DEFAULT_CK_REWRITE_BACKOFF_MS,
    CkEnding,
    CkRewritePolicy,
    End,
    Rewrite,
)
from pocketmq.common.message import MessageExt
from pocketmq.common.read_result import (
    FailureReason,
    ReadResult,
    ReadStatus,
    check_offset,
)

names = st.from_regex(r"[a-zA-Z0-9_%-]{1,20}", fullmatch=True)
offset_sets = st.lists(st.integers(0, 10_000), min_size=1, max_size=32, unique=True).map(sorted)


@st.composite
def checkpoints(draw):
    return PopCheckpoint.of_offsets(
        draw(names),
        draw(names),
        draw(st.integers(0, 63)),
        draw(offset_sets),
        draw(st.integers(0, 2**45)),
        draw(st.integers(0, 2**31)),
        draw(names),
        draw(st.integers(0, 7)),
    )


@given(checkpoints(), st.integers(0, 2**32 - 1), st.integers(0, 200))
def test_ck_json_round_trip(ck, bitmap_bits, rewrites):
    ck = ck.with_acks([o for i, o in enumerate(ck.queue_offsets) if bitmap_bits >> i & 1])
    ck = replace(ck, rewrite_count=rewrites)
    assert PopCheckpoint.from_json(ck.to_json()) == ck


def test_ck_reads_rocketmq_forms():
    # old form without "d" (offsets so+i), rp missing, rp unparsable, bn missing
    old = PopCheckpoint.from_json(b'{"so":5,"n":3,"pt":1,"it":2,"bm":2,"q":1,"t":"T","c":"G"}')
    assert old.queue_offsets == [5, 6, 7] and old.rewrite_count == 0 and old.unacked_offsets() == [5, 7]
    assert PopCheckpoint.from_json(b'{"so":5,"n":1,"pt":1,"it":2,"q":1,"t":"T","c":"G","rp":"x"}').rewrite_count == 127


@given(checkpoints(), st.data())
def test_acks_mark_exactly_their_messages(ck, data):
    acked = data.draw(st.lists(st.sampled_from(ck.queue_offsets), unique=True))
    foreign = data.draw(st.lists(st.integers(20_000, 30_000), max_size=3))
    after = ck.with_acks(acked + foreign)
    assert set(after.unacked_offsets()) == set(ck.queue_offsets) - set(acked)
    assert after.all_acked == (set(acked) == set(ck.queue_offsets))


@given(checkpoints(), st.lists(st.integers(0, 10_000), min_size=1, max_size=5))
def test_ack_record_pairs_with_its_ck(ck, offsets):
    ack = AckRecord(ck.topic, ck.group, ck.queue_id, ck.start_offset, ck.pop_time_ms, ck.broker_name, tuple(offsets))
    decoded = AckRecord.from_json(ack.to_json())
    assert decoded == ack and decoded.ck_key == ck.key


def test_ack_without_broker_name_takes_the_default():
    ack = AckRecord.from_json(b'{"ao":3,"so":1,"c":"G","t":"T","q":0,"pt":9}', default_broker_name="broker-a")
    assert ack.broker_name == "broker-a" and ack.acked_offsets == (3,)


def test_always_failing_read_ends_after_the_table_never_loops():
    policy = CkRewritePolicy()
    now_ms = 1_000_000
    ck = PopCheckpoint.of_offsets("T", "G", 0, [7, 8], now_ms, 30_000, "b")
    now_ms = ck.revive_time_ms
    waits = []
    for _ in range(100):
        decision = policy.decide(ck, 8, now_ms)
        if isinstance(decision, End):
            break
        assert isinstance(decision, Rewrite)
        ck = decision.checkpoint
        assert ck.queue_offsets == [8] and ck.pop_time_ms == 1_000_000
        assert ck.revive_time_ms == now_ms + decision.wait_ms
        waits.append(decision.wait_ms)
        now_ms = ck.revive_time_ms
    assert waits == list(DEFAULT_CK_REWRITE_BACKOFF_MS)
    assert decision == End(CkEnding.DEAD_LETTER, len(DEFAULT_CK_REWRITE_BACKOFF_MS))


@given(st.lists(st.integers(1, 10**7), min_size=1, max_size=20), st.integers(0, 10**8))
def test_rewrites_are_bounded_and_wait_at_least_the_floor(table, floor_ms):
    policy = CkRewritePolicy(tuple(table), CkEnding.DROP)
    ck = PopCheckpoint.of_offsets("T", "G", 0, [0], 0, 1, "b")
    now_ms, rewrites = 1, 0
    while isinstance(decision := policy.decide(ck, 0, now_ms, min_wait_ms=floor_ms), Rewrite):
        assert decision.wait_ms >= floor_ms and decision.wait_ms >= table[rewrites]
        rewrites += 1
        ck, now_ms = decision.checkpoint, decision.checkpoint.revive_time_ms
    assert rewrites == len(table) and decision.ending is CkEnding.DROP


def test_a_maximum_total_time_ends_a_ck_before_its_table_does():
    policy = CkRewritePolicy((10_000,) * 100, CkEnding.DROP, max_total_ms=35_000)
    ck = PopCheckpoint.of_offsets("T", "G", 0, [3], 0, 5_000, "b")
    now_ms, reads_ms = ck.revive_time_ms, []
    while isinstance(decision := policy.decide(ck, 3, now_ms), Rewrite):
        reads_ms.append(now_ms)
        ck, now_ms = decision.checkpoint, decision.checkpoint.revive_time_ms
    # reads at 5, 15, 25 s; the wait after 25 s is cut to 10 s... then 35 s: the time is up, not the 100 steps
    assert reads_ms == [5_000, 15_000, 25_000] and now_ms == 35_000
    assert decision == End(CkEnding.DROP, 3)
    cut = policy.decide(PopCheckpoint.of_offsets("T", "G", 0, [3], 0, 30_000, "b"), 3, 30_000)
    assert isinstance(cut, Rewrite) and cut.wait_ms == 5_000  # the last wait ends at the maximum, not 5 s after
    floored = policy.decide(PopCheckpoint.of_offsets("T", "G", 0, [3], 0, 30_000, "b"), 3, 30_000, min_wait_ms=8_000)
    assert isinstance(floored, Rewrite) and floored.wait_ms == 8_000  # a breaker's cool-down still wins
    late = PopCheckpoint.of_offsets("T", "G", 0, [3], 0, 60_000, "b")  # invisible past the maximum: ends at once
    assert policy.decide(late, 3, 60_000) == End(CkEnding.DROP, 0)
    assert isinstance(CkRewritePolicy((10,), max_total_ms=0).decide(late, 3, 10**12), Rewrite)  # 0: no limit


def test_policy_refuses_an_empty_or_zero_table():
    for table in ((), (10, 0)):
        with pytest.raises(ValueError):
            CkRewritePolicy(table)
    with pytest.raises(ValueError):
        CkRewritePolicy(max_total_ms=-1)


@given(
    names,
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.integers(0, 2**31),
    st.integers(0, 7),
    st.integers(0, 1),
    names,
    st.integers(0, 1000),
    st.integers(0, 2**40),
    st.integers(0, 2**40),
)
def test_receipt_handle_round_trip(topic, start, pt, it, rq, flag, broker, qid, extra, phys):
    handle = ReceiptHandle(topic, start, pt, it, rq, flag, broker, qid, start + extra, phys)
    assert ReceiptHandle.decode(handle.encode()) == handle
    assert handle.expired(pt + it) and not handle.expired(pt + it - 1)


@given(st.text(max_size=80))
def test_garbage_receipt_handles_are_refused_cleanly(text):
    try:
        ReceiptHandle.decode(text)
    except InvalidReceiptHandle:
        pass


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a b c",
        "T 1 2 3 0 9 b 0 5 1",
        "T 5 2 3 0 0 b 0 4 1",
        "T x 2 3 0 0 b 0 5 1",
        "bad/topic 1 2 3 0 0 b 0 5 1",
        "T 1 2 3 0 0  0 5 1",
    ],
)
def test_specific_bad_handles(text):
    with pytest.raises(InvalidReceiptHandle):
        ReceiptHandle.decode(text)


def test_read_of_another_offset_is_a_failed_read():
    msg = MessageExt(topic="T", body=b"x", queue_offset=9)
    assert check_offset(ReadResult.found(msg), 9).status is ReadStatus.FOUND
    mismatch = check_offset(ReadResult.found(msg), 8)
    assert mismatch.status is ReadStatus.FAILED and mismatch.failure is FailureReason.OFFSET_MISMATCH
    assert mismatch.need_retry and mismatch.reason == "OFFSET_MISMATCH"
