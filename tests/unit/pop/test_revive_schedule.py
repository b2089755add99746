"""Revive's wake-ups in virtual time: the ledger's heap of revive times, ``ReviveSchedule`` (full passes every
interval, wake-ups at the tick of the earliest due CK over the revive queues with a CK due), and the revive
service's periodic task on a ManualClock: a message comes back at its revive time's tick (also one popped
between passes with an invisible time shorter than the interval), a CK appended between passes wakes revive
only when it comes due before the planned wake-up, CKs revive leaves for later and failing writes make it wait
(no spinning), and the pending heap stays bounded."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from tests.unit.pop.pop_support import FaultyStore, pop, running_broker, send

from pocketmq.broker.config import POP_MIN_INVISIBLE_FLOOR_MS, BrokerConfig
from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.pop.ledger import ReviveLedger
from pocketmq.broker.pop.revive_queue import ReviveQueue
from pocketmq.broker.pop.revive_schedule import REVIVE_TICK_MS, ReviveSchedule
from pocketmq.broker.write_backoff import PassPacer
from pocketmq.common.config import load_config
from pocketmq.common.errors import ConfigError
from pocketmq.common.topic import pop_retry_topic
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import GetResult, GetStatus, PutStatus

pytestmark = pytest.mark.timeout(60)
INTERVAL_MS = 1_000


def ck(start: int, pop_ms: int, invisible_ms: int) -> PopCheckpoint:
    return PopCheckpoint.of_offsets("T", "G", 0, [start], pop_ms, invisible_ms, "b")


def ack_of(c: PopCheckpoint) -> AckRecord:
    return AckRecord("T", "G", 0, c.start_offset, c.pop_time_ms, "b", (c.start_offset,))


# -- the ledger's heap ----------------------------------------------------------------------------------------------
def test_due_lists_by_revive_offset_and_next_revive_time_skips_closed_and_listed():
    ledger = ReviveLedger()
    late, early, middle = ck(0, 1_000, 900), ck(1, 1_000, 100), ck(2, 1_000, 500)
    for offset, c in enumerate((late, early, middle)):
        ledger.on_checkpoint(c, offset)
    assert ledger.next_revive_time_ms() == 1_100
    ledger.on_ack(ack_of(early), 3)  # acked: no longer the earliest
    assert ledger.next_revive_time_ms() == 1_500
    assert ledger.due(1_899) == [middle]
    assert ledger.next_revive_time_ms() == 1_900  # middle is listed as due now
    assert ledger.due(1_900) == [late, middle]  # oldest revive offset first, middle still open
    assert ledger.next_revive_time_ms() is None
    assert ledger.due(1_600) == [middle]  # a smaller now_ms lists only what was due then


def test_a_ck_rewritten_under_its_key_is_due_at_its_new_time_only():
    ledger = ReviveLedger()
    first = ck(0, 1_000, 100)
    ledger.on_checkpoint(first, 0)
    assert ledger.due(1_100) == [first]
    rewritten = ck(0, 1_000, 10_000)  # keeps the pop time: the same key
    ledger.on_ack(ack_of(first), 1)  # revive closes it, then opens its rewrite (same key)
    ledger.on_checkpoint(rewritten, 2)
    assert ledger.due(1_100) == [] and ledger.next_revive_time_ms() == rewritten.revive_time_ms
    assert ledger.due(rewritten.revive_time_ms) == [rewritten]


def test_the_heap_stays_within_twice_the_open_cks():
    ledger = ReviveLedger()
    offset = 0
    for n in range(20_000):  # each CK acked at once: only the heap would remember it
        c = ck(n, 1_000 + n, 60_000)
        ledger.on_checkpoint(c, offset)
        ledger.on_ack(ack_of(c), offset + 1)
        offset += 2
    assert len(ledger) == 0 and len(ledger._waiting) <= 2 * 1024 + 1
    assert ledger.next_revive_time_ms() is None


# -- the schedule -------------------------------------------------------------------------------------------------
def test_the_first_pass_is_a_full_one_an_interval_after_start():
    schedule = ReviveSchedule(INTERVAL_MS)
    assert schedule.wait_ms(0, 5) == INTERVAL_MS  # nothing is known before the first pass
    assert schedule.full_pass(1_000)
    assert not schedule.full_pass(1_010) and not schedule.full_pass(1_999)
    assert schedule.full_pass(2_000)
    schedule.want_full_pass()  # an operator's change: the next wake-up is a full pass, once
    assert schedule.full_pass(2_100) and not schedule.full_pass(2_200)


def test_a_wake_up_falls_on_the_tick_of_the_earliest_due_ck_within_the_interval():
    schedule = ReviveSchedule(INTERVAL_MS, tick_ms=10)
    schedule.full_pass(1_000)
    assert schedule.wait_ms(1_003, None) == 997  # the next full pass
    assert schedule.wait_ms(1_003, 1_500) == 497  # 1,500 is a tick
    assert schedule.wait_ms(1_003, 1_501) == 507  # the tick after it: CKs due within a tick share a wake-up
    assert schedule.wait_ms(1_003, 5_000) == 997  # the full pass comes first
    assert schedule.wait_ms(1_003, 900) == 0  # due already (during the pass): at once
    # a CK appended since: an earlier wake-up only when its tick comes before the planned one
    assert schedule.wakes_earlier(1_489, 1_500) and not schedule.wakes_earlier(1_491, 1_500)
    assert not ReviveSchedule(INTERVAL_MS).wakes_earlier(0, 1_000)  # before the first full pass: only that one
    with pytest.raises(ValueError):
        ReviveSchedule(0)


def test_invisible_times_may_go_down_to_the_floor_and_no_lower():
    floor = POP_MIN_INVISIBLE_FLOOR_MS
    assert load_config(BrokerConfig, env={}, overrides={"pop_min_invisible_ms": floor}).pop_min_invisible_ms == floor
    with pytest.raises(ConfigError, match="pop_min_invisible_ms"):
        load_config(BrokerConfig, env={}, overrides={"pop_min_invisible_ms": floor - 1})


# -- the service in virtual time ---------------------------------------------------------------------------------
async def advance(clock: ManualClock, until_ms: int, step_ms: int = 1) -> None:
    """Move virtual time to ``until_ms`` in steps, letting the loop run what each step made ready."""
    while clock.now_ms() < until_ms:
        clock.advance(min(step_ms, until_ms - clock.now_ms()))
        for _ in range(20):
            await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def revive_running(tmp_path, **settings):
    """An in-process broker on a ManualClock whose revive runs its own passes, ``INTERVAL_MS`` apart
    (pop_support's brokers run none): (broker, clock)."""
    clock = ManualClock()
    async with running_broker(tmp_path, clock, **settings) as broker:
        revive = broker.pop.revive
        await revive.stop()
        revive.pacer = PassPacer(INTERVAL_MS, 30_000)
        revive.schedule = ReviveSchedule(INTERVAL_MS)
        revive.start()
        yield broker, clock
        await revive.stop()


def retried(broker, group: str = "G", topic: str = "T") -> int:
    return broker.store.max_queue_offset(pop_retry_topic(group, topic), 0)


async def test_a_message_comes_back_at_the_tick_of_its_revive_time_not_at_the_next_pass(tmp_path):
    async with revive_running(tmp_path) as (broker, clock):
        await send(broker, "T", 1)
        popped_ms = clock.now_ms()
        await pop(broker, "G", "T", invisible_ms=1_500)
        await advance(clock, popped_ms + 1_500 - 1)
        assert retried(broker) == 0
        await advance(clock, popped_ms + 1_500 + REVIVE_TICK_MS)
        assert retried(broker) == 1
        lateness = broker.metrics.get("pocketmq_pop_revive_lateness_seconds")
        assert lateness is not None and lateness.count() == 1 and lateness.sum() <= REVIVE_TICK_MS / 1000


async def test_a_ck_appended_between_full_passes_comes_back_at_its_tick_not_at_the_next_pass(tmp_path):
    async with revive_running(tmp_path, pop_min_invisible_ms=POP_MIN_INVISIBLE_FLOOR_MS) as (broker, clock):
        await advance(clock, clock.now_ms() + INTERVAL_MS + 5)  # the first full pass is over
        await send(broker, "T", 1)
        popped_ms = clock.now_ms()
        await pop(broker, "G", "T", invisible_ms=300)
        await advance(clock, popped_ms + 300 - 1)
        assert retried(broker) == 0  # never early
        await advance(clock, popped_ms + 300 + REVIVE_TICK_MS)
        assert retried(broker) == 1  # within a tick, not at the next full pass (695 ms later)
        assert all(queue.next_revive_time_ms() is None for queue in broker.pop.revive.queues)  # nothing waits


async def test_only_a_ck_due_before_the_planned_wake_up_wakes_revive(tmp_path):
    async with revive_running(tmp_path, pop_min_invisible_ms=POP_MIN_INVISIBLE_FLOOR_MS) as (broker, clock):
        revive = broker.pop.revive
        start_ms = clock.now_ms()
        await advance(clock, start_ms + INTERVAL_MS + 5)  # the first full pass; the next at start + 2,000
        await send(broker, "T", 3)
        rounds = revive._passes.rounds
        await pop(broker, "G", "T", max_count=1, invisible_ms=500)  # due before the next full pass
        await advance(clock, clock.now_ms() + 1)
        assert revive._passes.rounds == rounds + 1  # woken: the round finds nothing due and plans its tick
        await pop(broker, "G", "T", max_count=1, invisible_ms=700)  # due after the planned wake-up
        await pop(broker, "G", "T", max_count=1, invisible_ms=500)  # due within its tick
        await advance(clock, clock.now_ms() + 1)
        assert revive._passes.rounds == rounds + 1  # neither woke revive
        await advance(clock, start_ms + INTERVAL_MS + 5 + 500 + REVIVE_TICK_MS)
        assert revive._passes.rounds == rounds + 2 and retried(broker) == 2  # one wake-up for both 500 ms CKs
        await advance(clock, start_ms + INTERVAL_MS + 7 + 700 + REVIVE_TICK_MS)
        assert revive._passes.rounds == rounds + 3 and retried(broker) == 3


class NoRecords:
    """A store whose revive queue holds nothing: ``expect`` alone tells the queue of CKs."""

    def min_queue_offset(self, topic, queue_id):
        return 0

    def get_messages(self, *args, **kwargs):
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE)


def test_a_revive_queue_expects_appended_cks_until_it_catches_up():
    queue = ReviveQueue(NoRecords(), "R", 0, "b", 0)
    told: list[int] = []
    queue.on_earlier_revive = told.append
    queue.expect([ck(0, 1_000, 500), ck(1, 1_000, 300)])
    queue.expect([ck(2, 1_000, 400)])  # later than the one expected: nobody is told
    assert queue.next_revive_time_ms() == 1_300 and told == [1_300]
    queue.expect([ck(3, 1_000, 200)])
    assert queue.next_revive_time_ms() == 1_200 and told == [1_300, 1_200]
    queue.catch_up()  # the ledger knows of every CK appended before now
    assert queue.next_revive_time_ms() is None


async def test_cks_appended_while_writes_fail_do_not_cut_the_blocked_wait_short(tmp_path):
    async with revive_running(tmp_path, pop_min_invisible_ms=POP_MIN_INVISIBLE_FLOOR_MS) as (broker, clock):
        revive = broker.pop.revive
        await send(broker, "T", 40)
        faulty = FaultyStore(broker.store)
        faulty.refuse = lambda msgs: PutStatus.SERVICE_NOT_AVAILABLE  # the copies cannot be written
        revive.writes._store = faulty
        start_ms = clock.now_ms()
        for n in range(40):  # a pop every 250 ms for 10 s, each due before any planned wake-up
            await pop(broker, "G", "T", max_count=1, invisible_ms=POP_MIN_INVISIBLE_FLOOR_MS)
            await advance(clock, start_ms + (n + 1) * 250, step_ms=5)
        assert revive.pacer.blocked
        # blocked passes wait 1, 2, 4, 8 s: a handful of rounds, not one per pop
        assert revive._passes.rounds <= 10, revive._passes


async def test_failing_writes_and_cks_left_for_later_do_not_make_revive_spin(tmp_path):
    async with revive_running(tmp_path) as (broker, clock):
        revive = broker.pop.revive
        await send(broker, "T", 2)
        await pop(broker, "G", "T", max_count=1, invisible_ms=1_000)
        await pop(broker, "G", "T", max_count=1, invisible_ms=1_000)
        faulty = FaultyStore(broker.store)
        faulty.refuse = lambda msgs: PutStatus.SERVICE_NOT_AVAILABLE  # a full disk
        revive.writes._store = faulty
        for queue in revive.queues:
            queue._store = faulty
        start_ms = clock.now_ms()
        await advance(clock, start_ms + 20_000, step_ms=5)
        # 20 s of virtual time in 5 ms steps: a full pass an interval at most (longer while blocked), each CK
        # tried again after its backoff (10 s); not a wake-up per tick (2,000)
        assert revive._passes.rounds <= 20_000 // INTERVAL_MS + 2, revive._passes
        assert faulty.refused_puts <= 4 and sum(len(q.ledger) for q in revive.queues) == 2
