"""Where the special services of a slave acting as master write: the escape bridge and the side file.

The timer and revive services call a ``writes`` object (``TimerService.writes``, ``ReviveService.writes``);
a master's writes go to its store (``LocalTimerWrites``, ``LocalReviveWrites``), an acting slave's go here:

- ``EscapedTimerWrites``: each due message through ``EscapeBridge.put_message``; its "tombstone" is an entry
  in ``ActingProgress``. A failed escape (remote escape off, no other master, refused) stops the round: that
  timer and the ones after it stay pending and the next round retries them.
- ``EscapedReviveWrites``: retry copies and dead letters through ``put_to_specific_queue``; a rewritten CK
  through it too, into the revive topic of another group (the CK keeps this group's broker name, so that
  broker's revive reads the message back from here); the ACK that closes a CK becomes an ``ActingProgress``
  entry and the CK is closed in the local ledger. A failure keeps the CKs open (the next pass redoes them:
  copies that did escape before the failure may be written twice, at least once).
"""

from __future__ import annotations

import logging

from pocketmq.broker.acting_progress import ActingProgress
from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.pop.revive_queue import ReviveQueue, checkpoint_message
from pocketmq.cluster.escape import EscapeBridge, EscapeResult
from pocketmq.common.message import MessageExt
from pocketmq.errors import ServiceNotAvailableError

log = logging.getLogger(__name__)


class _FailureLog:
    """Logs an escape failure once per reason, not once per round."""

    def __init__(self, what: str):
        self._what = what
        self._reason: str | None = None

    def failed(self, result: EscapeResult, topic: str) -> None:
        if result.reason != self._reason:
            log.warning("event=escape_failed service=%s topic=%s reason=%s need_retry=%s description=%s",
                        self._what, topic, result.reason, result.need_retry, result.description)
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

    async def deliver(self, due: list[tuple[int, int]], reals: list[MessageExt | None]) -> list[tuple[int, int]]:
        """Same contract as ``LocalTimerWrites.deliver``: returns the (due ms, queue offset) pairs not delivered."""
        undelivered: list[tuple[int, int]] = []
        for index, ((deliver_ms, queue_offset), real) in enumerate(zip(due, reals)):
            if real is not None:
                result = await self._bridge.put_message(real)
                if not result.stored:
                    self._log.failed(result, real.topic)
                    undelivered = due[index:]
                    break
                self._log.stored()
                log.info("event=timer_escaped queue_offset=%d topic=%s to=%s/%d", queue_offset, real.topic,
                         result.target.broker_name, result.target.queue_id)
            self._progress.record_delivered(queue_offset, deliver_ms)
        if len(undelivered) < len(due):
            self._progress.save()
        return undelivered


class EscapedReviveWrites:
    def __init__(self, bridge: EscapeBridge, progress: ActingProgress):
        self._bridge = bridge
        self._progress = progress
        self._log = _FailureLog("revive")

    async def put_copies(self, messages: list[MessageExt]) -> bool:
        for msg in messages:
            result = await self._bridge.put_to_specific_queue(msg)
            if not result.stored:
                self._log.failed(result, msg.topic)
                return False
        self._log.stored()
        return True

    async def close(self, queue: ReviveQueue, closes: list[tuple[AckRecord, list[PopCheckpoint]]]) -> None:
        for ack, rewrites in closes:
            for ck in rewrites:
                result = await self._bridge.put_to_specific_queue(checkpoint_message(queue.topic, ck))
                if not result.stored:
                    self._log.failed(result, queue.topic)
                    self._progress.save()  # what closed before this CK stays closed
                    raise ServiceNotAvailableError(f"rewritten CK not escaped: {result.reason} {result.description}")
            self._progress.record_closed(queue.queue_id, ack)
            queue.ledger.close(ack.ck_key)
        self._progress.save()
