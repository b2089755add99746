"""The whole pop / ack / change-invisible / revive cycle of the engine, in virtual time, against a simple model.

Hypothesis draws a run of operations on one topic (2 queues, 8 messages, a group with retryMaxTimes 2, so
3 delivery attempts): pops by one of two consumers, acks and changes of invisible time on handles they hold
(current or stale), and clock advances followed by a revive pass. The model says, for every message: waiting
with its next attempt, in flight (with its current handle and deadline), acked, or dead. It checks:

- a pop hands out only waiting messages, with the model's attempt (never one in flight: no message is with
  two consumers at once, never one acked or dead);
- an ack or change succeeds exactly when the handle is the message's current one and revive has not handed
  the message back; a change keeps the attempt and a new deadline;
- revive returns every in-flight message whose deadline passed, attempt + 1, or dead-letters it after the
  third attempt;
- at the end (everything expired and revived, the rest popped and acked) each message was acked or sits in
  ``%DLQ%G`` exactly once, with reason MAX_ATTEMPTS.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.unit.pop.pop_support import pop, running_broker, send

from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.pop.copies import DLQ_REASON, REASON_MAX_ATTEMPTS
from pocketmq.common.errors import InvalidReceiptHandleError
from pocketmq.common.record import decode_record
from pocketmq.runtime.clock import ManualClock

GROUP, TOPIC = "G", "T"
MESSAGES = 8
MAX_ATTEMPTS = 3  # retryMaxTimes 2 + 1
MIN_INVISIBLE_MS = 1_000  # the broker's pop_min_invisible_ms default


@dataclass
class Held:
    """A handle a consumer got (from a pop or a change); it may have gone stale since."""

    body: str
    handle: object


@dataclass
class State:
    attempt: int = 1  # the attempt of the next (or current) delivery
    in_flight: object = None  # the current handle while in flight
    deadline_ms: int = 0
    acked: bool = False
    dead: bool = False


operations = st.lists(
    st.one_of(
        st.tuples(st.just("pop"), st.integers(0, 1), st.integers(1, 5), st.sampled_from([500, 1_000, 3_000, 20_000])),
        st.tuples(st.just("ack"), st.integers(0, 63)),
        st.tuples(st.just("change"), st.integers(0, 63), st.sampled_from([0, 2_000, 30_000])),
        st.tuples(st.just("advance"), st.sampled_from([400, 1_000, 2_500, 25_000])),
    ),
    min_size=3,
    max_size=40,
)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
# A change in the pop's millisecond: its new CK once took the old CK's key, losing the CK's other message and
# keeping the old handle valid.
@example([("pop", 0, 2, 500), ("change", 0, 0), ("ack", 0)])
def test_pop_cycle_follows_the_model(ops):
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run_model(Path(tmp), ops))


async def run_model(tmp: Path, ops) -> None:
    clock = ManualClock()
    async with running_broker(tmp, clock) as broker:
        broker.groups.create_or_update(SubscriptionGroupConfig(GROUP, retry_max_times=MAX_ATTEMPTS - 1))
        await send(broker, TOPIC, MESSAGES, queues=2)
        model = {f"m{i}": State() for i in range(MESSAGES)}
        held: list[Held] = []

        async def do_pop(count: int, invisible_ms: int) -> None:
            for msg, handle in await pop(broker, GROUP, TOPIC, count, invisible_ms):
                state = model[msg.body.decode()]
                assert not state.acked and not state.dead, "an acked or dead message came back"
                assert state.in_flight is None, "a message in flight was handed out again"
                assert msg.reconsume_times + 1 == state.attempt
                state.in_flight = handle
                state.deadline_ms = clock.now_ms() + max(invisible_ms, MIN_INVISIBLE_MS)
                held.append(Held(msg.body.decode(), handle))

        async def revive() -> None:
            await broker.pop.revive.run_once(clock.now_ms())
            for state in model.values():
                if state.in_flight is not None and state.deadline_ms <= clock.now_ms():
                    state.in_flight = None
                    state.dead = state.attempt >= MAX_ATTEMPTS
                    state.attempt += 1

        for op in ops:
            if op[0] == "pop":
                await do_pop(op[2], op[3])
            elif op[0] == "advance":
                clock.advance(op[1])
                await revive()
            elif held:
                target = held[op[1] % len(held)]
                state = model[target.body]
                current = state.in_flight is target.handle
                if op[0] == "ack":
                    [error] = await broker.pop.ack(GROUP, [target.handle])
                    assert (error is None) == current, error
                    if current:
                        state.in_flight, state.acked = None, True
                else:
                    try:
                        new = await broker.pop.change_invisible(GROUP, target.handle, op[2])
                    except InvalidReceiptHandleError:
                        assert not current
                    else:
                        assert current
                        assert new.pop_time_ms >= clock.now_ms()  # later than now only within the pop's ms
                        assert new.invisible_time_ms == max(op[2], MIN_INVISIBLE_MS)
                        state.in_flight = new
                        state.deadline_ms = new.revive_time_ms
                        held.append(Held(target.body, new))

        # The end: expire and revive everything, then pop and ack whatever is left until nothing is.
        for _ in range(2 * MAX_ATTEMPTS + 2):
            clock.advance(60_000)
            await revive()
            await do_pop(32, 1_000)
            while True:
                before = len(held)
                await do_pop(32, 1_000)
                if len(held) == before:
                    break
        assert all(s.acked or s.dead for s in model.values()), model
        got = broker.store.get_messages(f"%DLQ%{GROUP}", 0, 0, 64)
        dead = [decode_record(r)[0] for r in got.records]
        assert sorted(m.body.decode() for m in dead) == sorted(b for b, s in model.items() if s.dead)
        assert {m.properties[DLQ_REASON] for m in dead} <= {REASON_MAX_ATTEMPTS}
