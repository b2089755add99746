"""Turns dead-letter references into real dead letters once their messages can be read.

Revive writes a reference (common/dead_letter_reference.py) into the reference topic, never into
``%DLQ%<group>``, when it gives up reading a message. This service replays the reference topic's queue on this
broker (``fold``) and, every ``wait_ms()`` (the first step of the CK rewrite backoff table: 10 s by default),
reads the messages of the references still open through revive's ``ReaderRouter`` (this store, or a remote
reader of the broker group that stores the message, behind its breaker; one ``read_many`` per queue):

- FOUND: the real dead letter (``copies.dead_letter`` with the reference's reason) goes to ``%DLQ%<group>``,
  then a ``resolved`` event closes the reference;
- NOT_FOUND: a ``gone`` event with the cause closes it (there is nothing left to dead-letter);
- FAILED: it stays open for the next pass;
- a dead letter that can never be written (``%DLQ%<group>`` too long): a ``refused`` event with the reason
  closes it, logged at ERROR; a write that fails for a passing reason leaves it open.

The dead letter is written before the event that closes its reference, so a crash between the two writes the
dead letter again (at least once, as everywhere in revive). It runs on a master, with revive; a reference that
a slave acting as master escaped here is this broker's like any other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pocketmq.broker.pop import copies
from pocketmq.broker.pop.read_routing import ReaderRouter
from pocketmq.common.dead_letter_reference import (
    REFERENCE_TOPIC,
    STATE_GONE,
    STATE_OPEN,
    STATE_PROPERTY,
    STATE_REFUSED,
    STATE_RESOLVED,
    DeadLetterReference,
    closing_properties,
    fold,
)
from pocketmq.common.message import MessageExt
from pocketmq.common.read_result import ReadResult, ReadStatus
from pocketmq.metrics import MetricsRegistry
from pocketmq.runtime.periodic import PeriodicTask
from pocketmq.store.api import GetStatus

if TYPE_CHECKING:
    from pocketmq.broker.write_path import WritePathSwitch

log = logging.getLogger(__name__)

_REPLAY_BATCH = 256


def closing_event(ref: DeadLetterReference, state: str, outcome: str) -> MessageExt:
    return MessageExt(
        topic=REFERENCE_TOPIC, body=ref.to_json(), properties=closing_properties(ref, state, outcome), queue_id=0
    )


class ReferenceResolver:
    def __init__(
        self,
        store,
        readers: ReaderRouter,
        write_path: WritePathSwitch,
        clock,
        *,
        wait_ms: Callable[[], float],
        metrics: MetricsRegistry | None = None,
    ):
        self._store = store
        self._readers = readers
        self._write_path = write_path
        self._open: dict[tuple[str, str, int, int, str], DeadLetterReference] = {}
        self._next_offset = 0  # of the reference topic's queue: what the replay read up to
        registry = metrics if metrics is not None else MetricsRegistry()
        self._closed = registry.counter(
            "pocketmq_pop_dlq_references_closed_total",
            "Dead-letter references closed, by how (resolved: the real dead letter was written; gone; refused)",
            ("state",),
        )
        self._passes = PeriodicTask(
            "broker-pop-dlq-references", self.run_once, wait_ms, clock=clock, metrics=metrics, jitter=0
        )

    def open_references(self) -> list[DeadLetterReference]:
        """The references whose messages are still to be read, as of the reference topic now."""
        self.catch_up()
        return list(self._open.values())

    def start(self) -> None:
        self.catch_up()
        self._passes.start()

    async def stop(self) -> None:
        await self._passes.stop()

    def catch_up(self) -> None:
        """Fold the reference topic's entries written since the last call."""
        while True:
            got = self._store.get_messages(REFERENCE_TOPIC, 0, self._next_offset, _REPLAY_BATCH)
            if got.status is not GetStatus.FOUND or not got.records:
                return
            for key, state in fold(got.messages()).items():
                if state.state == STATE_OPEN:
                    self._open[key] = state.reference
                else:
                    self._open.pop(key, None)
            if got.next_begin_offset <= self._next_offset:
                return
            self._next_offset = got.next_begin_offset

    async def run_once(self) -> int:
        """One pass over the open references; returns how many it closed."""
        self.catch_up()
        by_queue: dict[tuple[str, str, int], list[DeadLetterReference]] = {}
        for ref in self._open.values():
            by_queue.setdefault((ref.broker_name, ref.topic, ref.queue_id), []).append(ref)
        closed = 0
        for (broker_name, topic, queue_id), refs in by_queue.items():
            reads = await self._readers.for_broker(broker_name).read_many(
                topic, queue_id, [ref.queue_offset for ref in refs]
            )
            closed += await self._close([(ref, reads[ref.queue_offset]) for ref in refs])
        self.catch_up()
        return closed

    async def _close(self, reads: list[tuple[DeadLetterReference, ReadResult]]) -> int:
        """Write the dead letters of the references read, then the events that close what can be closed."""
        found = [(ref, read.message) for ref, read in reads if read.message is not None]
        writes = self._write_path.current.revive
        letters = [copies.dead_letter(msg, ref.group, ref.reason) for ref, msg in found]
        results = await writes.put_copies(letters) if letters else []
        events = []
        for (ref, _), result in zip(found, results):
            if result.stored:
                events.append(closing_event(ref, STATE_RESOLVED, f"dead letter written to %DLQ%{ref.group}"))
            elif result.is_permanent:
                log.error("event=dlq_reference_refused ref=%r reason=%s", ref.describe(), result)
                events.append(closing_event(ref, STATE_REFUSED, str(result)))
        for ref, read in reads:
            if read.status is ReadStatus.NOT_FOUND:
                events.append(closing_event(ref, STATE_GONE, f"{read.reason}: {read.description}"))
        if not events:
            return 0
        stored = 0
        for event, result in zip(events, await writes.put_copies(events)):
            if result.stored:
                stored += 1
                self._closed.inc(state=event.properties[STATE_PROPERTY])
        log.info("event=dlq_references_closed closed=%d tried=%d", stored, len(reads))
        return stored

    def __repr__(self) -> str:
        return f"<ReferenceResolver open={len(self._open)}>"
