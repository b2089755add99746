"""The pure parts of background writes: the per-item backoff and its ending, the pass pacer, the typed write
results and their classification, revive's fallbacks for a copy that can never be written, and the loop-lag
monitor catching a callback that holds the loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from pocketmq.broker.pop import copies
from pocketmq.broker.pop.checkpoint import PopCheckpoint
from pocketmq.broker.pop.revive import Copy, fallback, write_ending
from pocketmq.broker.write_backoff import PassPacer, WriteBackoff
from pocketmq.cluster.escape import EscapeResult
from pocketmq.common.dead_letter_reference import REFERENCE_PROPERTY
from pocketmq.common.message import MessageExt
from pocketmq.runtime.loop_lag import LoopLagMonitor
from pocketmq.store.api import PutResult, PutStatus
from pocketmq.store.write_result import WriteStatus, of_put, of_puts, write_problem
from pocketmq.testing.loop_lag import measure_loop_lag


def test_each_failure_waits_its_step_then_the_item_ends_and_parks():
    backoff = WriteBackoff((1_000, 5_000))
    assert backoff.ready("ck", 0) and not backoff.ends("ck")
    first = backoff.failed("ck", 0, "DISK_FULL")
    assert (first.failures, first.wait_ms, first.ends_next, first.parked) == (1, 1_000, False, False)
    assert not backoff.ready("ck", 999) and backoff.ready("ck", 1_000)
    second = backoff.failed("ck", 1_000, "DISK_FULL")
    assert (second.wait_ms, second.ends_next, second.parked) == (5_000, True, False) and backoff.ends("ck")
    parked = backoff.failed("ck", 6_000, "DISK_FULL")  # the ending failed too: the last step, again and again
    assert (parked.wait_ms, parked.ends_next, parked.parked) == (5_000, True, True) and backoff.parked() == 1
    assert backoff.last_reason("ck") == "DISK_FULL"
    backoff.succeeded("ck")
    assert backoff.ready("ck", 0) and len(backoff) == 0


def test_retain_forgets_items_closed_elsewhere_and_a_new_table_applies_to_the_next_failure():
    backoff = WriteBackoff((1_000,))
    backoff.failed("open", 0, "x")
    backoff.failed("acked", 0, "x")
    backoff.retain(lambda key: key == "open")
    assert len(backoff) == 1 and backoff.ends("open")
    backoff.backoff_ms = (1_000, 2_000)
    assert not backoff.ends("open")
    with pytest.raises(ValueError):
        backoff.backoff_ms = ()


def test_a_blocked_pass_doubles_the_wait_up_to_the_cap_and_progress_resets_it():
    pacer = PassPacer(1_000, 5_000)
    assert [pacer.after_pass(stored=0, failed=3) for _ in range(4)] == [2_000, 4_000, 5_000, 5_000]
    assert pacer.blocked
    assert pacer.after_pass(stored=1, failed=3) == 1_000 and not pacer.blocked  # some progress: no backoff
    assert pacer.after_pass(stored=0, failed=0) == 1_000  # nothing to do is not blocked


def test_store_and_escape_answers_are_typed():
    assert of_put(PutResult(PutStatus.FLUSH_DISK_TIMEOUT)).stored
    assert of_put(PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason="disk full")).status is WriteStatus.TRANSIENT
    assert of_put(PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED)).is_permanent
    assert of_puts([PutResult(PutStatus.PUT_OK), PutResult(PutStatus.MESSAGE_ILLEGAL, reason="r")]).is_permanent
    assert EscapeResult.failed("CONNECTION", "refused").write_result().status is WriteStatus.TRANSIENT
    assert EscapeResult.failed("REFUSED_13", "illegal", need_retry=False).write_result().is_permanent
    assert EscapeResult(True).write_result().stored


def test_write_problem_finds_long_topics_and_large_properties():
    assert write_problem(MessageExt(topic="T", body=b"x")) is None
    assert "longer than 127" in write_problem(MessageExt(topic="%RETRY%" + "g" * 121, body=b"x"))
    assert "32767" in write_problem(MessageExt(topic="T", body=b"x", properties={"p": "v" * 32_767}))


def test_a_copy_falls_back_to_a_dead_letter_then_a_reference_then_nothing():
    ck = PopCheckpoint.of_offsets("T", "G", 0, [7], 1_000, 10_000, "broker-a")
    source = MessageExt(topic="T", body=b"body", queue_offset=7, properties={"k": "v"})
    retry = Copy(copies.retry_copy(source, "G", 1_000), False, source, 7)
    dead = fallback(retry, ck, "topic too long")
    assert dead.dead_letter and dead.message.topic == "%DLQ%G" and dead.message.body == b"body"
    assert dead.message.properties[copies.DLQ_REASON] == copies.REASON_WRITE_REFUSED
    reference = fallback(dead, ck, "properties too large")
    assert reference.message.properties[REFERENCE_PROPERTY] == "true" and b'"queueOffset":7' in reference.message.body
    assert b"properties too large" in reference.message.body
    assert fallback(reference, ck, "DLQ topic too long") is None
    ended = write_ending(retry, ck)
    assert ended.dead_letter and ended.message.properties[copies.DLQ_REASON] == copies.REASON_WRITE_FAILED
    assert write_ending(dead, ck) is dead


async def test_the_monitor_sees_a_callback_that_holds_the_loop_on_the_cpu():
    async with measure_loop_lag(interval_ms=5) as lag:
        await asyncio.sleep(0.02)
    assert lag.samples >= 1
    async with measure_loop_lag(interval_ms=5) as held:
        end = time.thread_time() + 0.15
        while time.thread_time() < end:  # 150 ms of CPU without yielding
            pass
    assert held.max_busy_ms >= 100 and held.max_lag_ms >= held.max_busy_ms


def test_monitor_repr_and_metrics_names():
    from pocketmq.metrics import MetricsRegistry

    registry = MetricsRegistry()
    LoopLagMonitor(metrics=registry)
    assert registry.get("pocketmq_event_loop_lag_seconds") is not None
    assert registry.get("pocketmq_event_loop_max_busy_seconds") is not None
