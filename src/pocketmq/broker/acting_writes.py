"""Where the special services of a slave acting as master write: the escape bridge and the side file.

The timer, revive, the pop engine and the transaction service write through the broker's write path
(``broker.write_path``); a master's is its store (``LocalWritePath``), an acting slave's is ``EscapedWritePath``,
made of the four below:

- ``EscapedTimerWrites``: each due message through ``EscapeBridge.put_message`` (a dead letter through
  ``put_to_specific_queue``); its "tombstone" is an entry in ``ActingProgress``. A failed escape that may pass
  (remote escape off, no other master, unreachable) stops the round: that timer and the ones after it stay
  pending, in the timer's write backoff; a refusal for good makes that message a dead letter.
- ``EscapedReviveWrites``: retry copies and dead letters through ``put_to_specific_queue``; a rewritten CK
  through it too, into the revive topic of another group (the CK keeps this group's broker name, so that
  broker's revive reads the message back from here); the ACK that closes a CK becomes an ``ActingProgress``
  entry and the CK is closed in the local ledger. A failure that may pass keeps the CK open, in revive's write
  backoff (copies of it that did escape before the failure may be written twice, at least once); a copy the
  other master refuses for good (MESSAGE_ILLEGAL) is replaced by its dead letter, as on a master.
- ``ActingPopWrites``: POP on the acting slave. A pop's CK escapes to the revive topic of another group
  (``put_to_specific_queue``: the queue ``floorMod(hash(revive topic + storeHost), #queues)``, which is also
  the revive queue id its receipt handles carry); an ack or change of such a handle is forwarded the same
  way, so it lands in the same revive queue as its CK (RocketMQ's rule). Dead letters of the pop path (a
  client's forward to the DLQ, FIFO past its max attempts) escape with ``put_to_specific_queue`` too. An ack
  of a CK of the replica (popped from the master before it went away) is kept in ``ActingProgress`` and
  applied to the local ledger. A failed escape fails the pop (nothing is handed out, the offset does not
  move) or the ack (the client retries it). A CK whose escape got no answer may be stored there all the same;
  it would revive messages the next pop hands out again (also after an OK ack of them), so it is withdrawn: once
  its deadline passed (no later than that can it be stored) an ACK of all its messages goes to the same queue.
- ``EscapedTransactionWrites`` (``broker.transaction.writes``): each pending half message, still a half message,
  to a queue of its real topic on another group's master, which checks it.
"""

from __future__ import annotations

import asyncio
import logging

from pocketmq.broker.acting_progress import ActingProgress
from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.pop.revive_queue import ReviveQueue, ack_message, checkpoint_message
from pocketmq.broker.transaction.writes import EscapedTransactionWrites
from pocketmq.cluster.escape import EscapeBridge, EscapeResult, EscapeTarget, Routes
from pocketmq.common.errors import ServiceNotAvailableError
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import DLQ_GROUP_TOPIC_PREFIX
from pocketmq.runtime.clock import Clock, SystemClock
from pocketmq.store.write_result import STORED, WriteResult

log = logging.getLogger(__name__)


class _FailureLog:
    """Logs an escape failure once per reason, not once per round."""

    def __init__(self, what: str):
        self._what = what
        self._reason: str | None = None

    def failed(self, result: EscapeResult, topic: str) -> None:
        if result.reason != self._reason:
            log.warning(
                "event=escape_failed service=%s topic=%s reason=%s need_retry=%s description=%s",
                self._what,
                topic,
                result.reason,
                result.need_retry,
                result.description,
            )
        self._reason = result.reason

    def stored(self) -> None:
        if self._reason is not None:
            log.info("event=escape_recovered service=%s", self._what)
        self._reason = None


class EscapedTimerWrites:
    def __init__(self, bridge: EscapeBridge, progress: ActingProgress):
        self._bridge = bridge
        self._progress = progress
        self._log = _FailureLog("timer")

    async def deliver(self, due: list[tuple[int, int]], reals: list[MessageExt | None]) -> list[WriteResult]:
        """Same contract as ``LocalTimerWrites.deliver``: one result per (due ms, queue offset) pair. A message
        another master refuses for good does not stop the others; the first failure that may pass does, and
        every pair not tried gets that failure. A dead letter goes to a specific queue (a DLQ has no route)."""
        results: list[WriteResult] = []
        routes: Routes = {}
        for (deliver_ms, queue_offset), real in zip(due, reals):
            if real is not None:
                put = (
                    self._bridge.put_to_specific_queue
                    if real.topic.startswith(DLQ_GROUP_TOPIC_PREFIX)
                    else self._bridge.put_message
                )
                escaped = await put(real, routes)
                if not escaped.stored:
                    self._log.failed(escaped, real.topic)
                    result = escaped.write_result()
                    if not result.is_permanent:
                        results += [result] * (len(due) - len(results))
                        break
                    results.append(result)
                    continue
                self._log.stored()
            self._progress.record_delivered(queue_offset, deliver_ms)
            results.append(STORED)
        if any(r.stored for r in results):
            self._progress.save()
        return results


class EscapedReviveWrites:
    def __init__(self, bridge: EscapeBridge, progress: ActingProgress):
        self._bridge = bridge
        self._progress = progress
        self._log = _FailureLog("revive")

    async def put_copies(self, messages: list[MessageExt]) -> list[WriteResult]:
        """Same contract as ``LocalReviveWrites.put_copies``. A copy another master refused for good does not stop
        the others; the first failure that may pass does (the target is likely down for the rest too), and
        every copy not tried gets that failure."""
        routes: Routes = {}
        results: list[WriteResult] = []
        for msg in messages:
            escaped = await self._bridge.put_to_specific_queue(msg, routes)
            if escaped.stored:
                self._log.stored()
                results.append(STORED)
                continue
            self._log.failed(escaped, msg.topic)
            result = escaped.write_result()
            if not result.is_permanent:
                return results + [result] * (len(messages) - len(results))
            results.append(result)
        return results

    async def close(self, queue: ReviveQueue, closes: list[tuple[AckRecord, list[PopCheckpoint]]]) -> None:
        routes: Routes = {}
        for ack, rewrites in closes:
            for ck in rewrites:
                result = await self._bridge.put_to_specific_queue(checkpoint_message(queue.topic, ck), routes)
                if not result.stored:
                    self._log.failed(result, queue.topic)
                    self._progress.save()  # what closed before this CK stays closed
                    raise ServiceNotAvailableError(f"rewritten CK not escaped: {result.reason} {result.description}")
            self._progress.record_ack(queue.queue_id, ack)
            queue.ledger.close(ack.ck_key)
        self._progress.save()


class ActingPopWrites:
    forwards_unknown_handles = True  # a handle of this group whose CK is not here may have escaped elsewhere

    def __init__(self, bridge: EscapeBridge, progress: ActingProgress, revive_topic: str, clock: Clock | None = None):
        self._bridge = bridge
        self._progress = progress
        self._revive_topic = revive_topic
        self._clock = clock if clock is not None else SystemClock()
        self._log = _FailureLog("pop")

    async def _escape(self, msg: MessageExt, routes: Routes | None = None, ck: PopCheckpoint | None = None) -> int:
        result = await self._bridge.put_to_specific_queue(msg, routes)
        if not result.stored:
            self._log.failed(result, msg.topic)
            if ck is not None and result.target is not None and result.deadline_ms is not None:
                await self._withdraw(ck, result.target, result.deadline_ms)  # no answer: it may be stored
            raise ServiceNotAvailableError(
                f"the master of this group is away and its CK/ACK could not be escaped: "
                f"{result.reason} {result.description}"
            )
        self._log.stored()
        assert result.target is not None  # a stored escape names where it went
        return result.target.queue_id

    async def _withdraw(self, ck: PopCheckpoint, target: EscapeTarget, deadline_ms: int) -> None:
        """Close ``ck`` where its escape may have stored it without an answer: an ACK of all its messages to the
        same queue, sent once the CK's deadline passed, so that if the CK is stored at all it is stored before."""
        await asyncio.sleep(max(0.0, (deadline_ms - self._clock.now_ms()) / 1000))
        result = await self._bridge.put_to(
            ack_message(self._revive_topic, target.queue_id, ck.ack_of(ck.queue_offsets)), target
        )
        log.log(
            logging.INFO if result.stored else logging.WARNING,
            "event=escaped_ck_withdrawn stored=%s group=%s topic=%s queue=%d offset=%d target=%s reason=%s",
            result.stored,
            ck.group,
            ck.topic,
            ck.queue_id,
            ck.start_offset,
            target.broker_name,
            result.reason or "the CK's answer never came",
        )

    async def put_messages(self, messages: list[MessageExt]) -> None:
        """Dead letters of the pop path (forwarded by a client, FIFO past its max attempts)."""
        routes: Routes = {}
        for msg in messages:
            await self._escape(msg, routes)

    async def checkpoint(self, queue: ReviveQueue | None, ck: PopCheckpoint) -> int:
        return await self._escape(checkpoint_message(self._revive_topic, ck), ck=ck)

    async def acks(self, queue: ReviveQueue, acks: list[AckRecord]) -> None:
        """Acks of CKs of the replica: kept beside it (the master appends them when it takes over)."""
        for ack in acks:
            self._progress.record_ack(queue.queue_id, ack)
            queue.ledger.apply_ack(ack)
        self._progress.save()

    async def fifo_state(self) -> None:
        """A FIFO ack here holds in this slave's own FIFO state (handed back to its master at the handover)."""

    async def forward_acks(self, acks: list[AckRecord]) -> None:
        routes: Routes = {}
        for ack in acks:
            await self._escape(ack_message(self._revive_topic, 0, ack), routes)

    async def change(self, queue: ReviveQueue | None, old_ack: AckRecord, new_ck: PopCheckpoint) -> int:
        # The new CK first: should the ack fail after it, the message is tracked twice (at least once), never
        # by no CK at all.
        if queue is None:
            revive_queue_id = await self.checkpoint(None, new_ck)
            await self.forward_acks([old_ack])
            return revive_queue_id
        queue.ledger.hold(old_ack.ck_key)  # while the new CK escapes, revive must not hand the old one back
        try:
            revive_queue_id = await self.checkpoint(None, new_ck)
        finally:
            queue.ledger.unhold(old_ack.ck_key)
        await self.acks(queue, [old_ack])
        return revive_queue_id


class EscapedWritePath:
    """A slave acting as master: every special service writes through ``bridge``; what it closed is kept in
    ``progress`` (the side file its master takes over)."""

    name = "escaped"

    def __init__(self, bridge: EscapeBridge, progress: ActingProgress, revive_topic: str):
        self.timer = EscapedTimerWrites(bridge, progress)
        self.revive = EscapedReviveWrites(bridge, progress)
        self.pop = ActingPopWrites(bridge, progress, revive_topic)
        self.transaction = EscapedTransactionWrites(bridge)
