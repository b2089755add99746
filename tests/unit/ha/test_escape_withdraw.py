"""A pop on a slave acting as master whose CK escape got no answer: the CK may be stored on the other group all
the same, and would revive messages the next pop hands out again; the pop fails and withdraws the CK."""

from __future__ import annotations

import json

import pytest
from tests.unit.pop.pop_support import acting_path, pop, running_broker, send

from pocketmq.broker.acting_progress import ActingProgress
from pocketmq.cluster.escape import EscapeResult, EscapeTarget
from pocketmq.common import properties as props
from pocketmq.common.errors import ServiceNotAvailableError
from pocketmq.runtime.clock import ManualClock

TARGET = EscapeTarget("group-b", "b:0", 3)


class LostAnswerBridge:
    """Stores every write (on ``stored``) but answers the CK's with a lost connection, or with ``refusal``."""

    def __init__(self, clock, refusal: EscapeResult | None = None):
        self._clock = clock
        self._refusal = refusal
        self.stored: list[tuple[EscapeTarget, object]] = []

    async def put_to_specific_queue(self, msg, routes=None):
        if self._refusal is not None:
            return self._refusal
        self.stored.append((TARGET, msg))
        return EscapeResult.failed("CONNECTION", "closed", target=TARGET, deadline_ms=self._clock.now_ms())

    async def put_to(self, msg, target):
        self.stored.append((target, msg))
        return EscapeResult(True, target)


async def test_a_ck_escape_without_an_answer_fails_the_pop_and_is_withdrawn(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 3)
        bridge = LostAnswerBridge(clock)
        broker.write_path.use(acting_path(bridge, ActingProgress(tmp_path / "acting.json"), clock))
        with pytest.raises(ServiceNotAvailableError):
            await pop(broker, "G", "T")
        assert broker.offsets.query("G", "T", 0) == 0  # nothing handed out: the next pop takes them
        [(_, ck), (target, ack)] = bridge.stored
        assert target == TARGET and ack.queue_id == TARGET.queue_id  # the CK's queue, after it
        assert (ck.properties[props.TAGS], ack.properties[props.TAGS]) == ("ck", "bAck")
        closed = json.loads(ack.body)
        assert (closed["so"], closed["pt"], sorted(closed["aol"])) == (0, json.loads(ck.body)["pt"], [0, 1, 2])


async def test_a_refused_ck_escape_is_not_withdrawn(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        await send(broker, "T", 1)
        bridge = LostAnswerBridge(clock, refusal=EscapeResult.failed("REFUSED_14", "disk full", target=TARGET))
        broker.write_path.use(acting_path(bridge, ActingProgress(tmp_path / "acting.json"), clock))
        with pytest.raises(ServiceNotAvailableError):
            await pop(broker, "G", "T")
        assert bridge.stored == []
