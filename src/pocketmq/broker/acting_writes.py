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
  the revive queue id its receipt handles carry); the slave remembers where each went. An ack or change of such
  a handle goes to exactly that queue (``put_to``), and only while it can still be stored there before the CK
  falls due (its revive time is more than the escape timeout away), so an ack answered OK always closes its CK
  before that broker's revive could pick it; any other handle whose CK is not here is refused (invalid): its
  message comes back, and the client learns that the ack did not hold. Dead letters of the pop path (a
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
from dataclasses import dataclass

from pocketmq.broker.acting_progress import ActingProgress
from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.pop.revive_queue import PartlyClosedError, ReviveQueue, ack_message, checkpoint_message
from pocketmq.broker.transaction.writes import EscapedTransactionWrites
from pocketmq.cluster.escape import DEFAULT_ESCAPE_TIMEOUT_MS, EscapeBridge, EscapeResult, EscapeTarget, Routes
from pocketmq.common.errors import InvalidReceiptHandleError, ServiceNotAvailableError
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
        for closed, (ack, rewrites) in enumerate(closes):
            for ck in rewrites:
                result = await self._bridge.put_to_specific_queue(checkpoint_message(queue.topic, ck), routes)
                if not result.stored:
                    self._log.failed(result, queue.topic)
                    self._progress.save()  # what closed before this CK stays closed
                    raise PartlyClosedError(f"rewritten CK not escaped: {result.reason} {result.description}", closed)
            self._progress.record_ack(queue.queue_id, ack)
            queue.ledger.close(ack.ck_key)
        self._progress.save()


@dataclass(slots=True)
class _EscapedCk:
    """A CK a pop on this slave escaped: where it went and which of its messages are not acked yet."""

    ck: PopCheckpoint
    target: EscapeTarget
    open_offsets: set[int]


class ActingPopWrites:
    def __init__(
        self,
        bridge: EscapeBridge,
        progress: ActingProgress,
        revive_topic: str,
        clock: Clock | None = None,
        escape_timeout_ms: int = DEFAULT_ESCAPE_TIMEOUT_MS,
    ):
        self._bridge = bridge
        self._progress = progress
        self._revive_topic = revive_topic
        self._clock = clock if clock is not None else SystemClock()
        self._escape_timeout_ms = escape_timeout_ms
        self._log = _FailureLog("pop")
        # CK key -> the CKs popped here that escaped (in memory: after a restart of the slave their handles are
        # refused, and their messages come back through the revive of the broker holding them: at least once).
        self._escaped: dict[str, _EscapedCk] = {}

    def forwardable(self, ck_key: str, queue_offset: int) -> bool:
        """Whether an ack or change of the message at ``queue_offset`` of the CK ``ck_key`` (not open here) goes
        on: the CK escaped from here, the message is not acked, and an ack sent now is stored where the CK is
        before the CK falls due there (an escape that arrives later than its timeout is refused), so that
        broker's revive never hands the message back after the ack answered OK."""
        escaped = self._escaped.get(ck_key)
        return (
            escaped is not None
            and queue_offset in escaped.open_offsets
            and self._clock.now_ms() + self._escape_timeout_ms <= escaped.ck.revive_time_ms
        )

    def escaped_in_flight(self, group: str, topic: str, queue_id: int) -> list[PopCheckpoint]:
        """The escaped CKs of one queue not past their revive time, with their acks so far: for the staged gate,
        which sees only the CKs of this broker's revive queues. Past its revive time a CK is the revive of the
        broker holding it (a retry copy), no longer this broker's."""
        now_ms = self._clock.now_ms()
        return [
            e.ck.with_acks(set(e.ck.queue_offsets) - e.open_offsets)
            for e in self._escaped.values()
            if (e.ck.group, e.ck.topic, e.ck.queue_id) == (group, topic, queue_id) and now_ms < e.ck.revive_time_ms
        ]

    async def _escape(self, msg: MessageExt, routes: Routes | None = None, ck: PopCheckpoint | None = None) -> int:
        result = await self._bridge.put_to_specific_queue(msg, routes)
        target = self._stored(result, msg)
        if result.target is not None and not result.stored and ck is not None and result.deadline_ms is not None:
            await self._withdraw(ck, result.target, result.deadline_ms)  # no answer: it may be stored
        if target is None:
            raise _not_escaped(result)
        if ck is not None:
            self._remember(ck, target)
        return target.queue_id

    def _stored(self, result: EscapeResult, msg: MessageExt) -> EscapeTarget | None:
        if not result.stored:
            self._log.failed(result, msg.topic)
            return None
        self._log.stored()
        assert result.target is not None  # a stored escape names where it went
        return result.target

    def _remember(self, ck: PopCheckpoint, target: EscapeTarget) -> None:
        now_ms = self._clock.now_ms()
        # CKs past their revive time are the other broker's revive's now: nothing here can ack them any more.
        for key in [k for k, e in self._escaped.items() if e.ck.revive_time_ms < now_ms]:
            del self._escaped[key]
        self._escaped[ck.key] = _EscapedCk(ck, target, set(ck.queue_offsets))

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
        """Acks of handles ``forwardable`` found good: each to the queue its CK went to."""
        for ack in acks:
            escaped = self._escaped.get(ack.ck_key)
            if escaped is None or not all(self.forwardable(ack.ck_key, o) for o in ack.acked_offsets):
                raise InvalidReceiptHandleError("the receipt handle's CK is not open on this broker any more")
            msg = ack_message(self._revive_topic, escaped.target.queue_id, ack)
            if self._stored(await self._bridge.put_to(msg, escaped.target), msg) is None:
                raise ServiceNotAvailableError(
                    f"the master of this group is away and the ack could not reach {escaped.target.broker_name}, "
                    "where its CK is"
                )
            escaped.open_offsets.difference_update(ack.acked_offsets)
            if not escaped.open_offsets:
                del self._escaped[ack.ck_key]

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


def _not_escaped(result: EscapeResult) -> ServiceNotAvailableError:
    return ServiceNotAvailableError(
        f"the master of this group is away and its CK/ACK could not be escaped: {result.reason} {result.description}"
    )


class EscapedWritePath:
    """A slave acting as master: every special service writes through ``bridge``; what it closed is kept in
    ``progress`` (the side file its master takes over)."""

    name = "escaped"

    def __init__(self, bridge: EscapeBridge, progress: ActingProgress, revive_topic: str, clock: Clock | None = None):
        self.timer = EscapedTimerWrites(bridge, progress)
        self.revive = EscapedReviveWrites(bridge, progress)
        self.pop = ActingPopWrites(bridge, progress, revive_topic, clock)
        self.transaction = EscapedTransactionWrites(bridge)
