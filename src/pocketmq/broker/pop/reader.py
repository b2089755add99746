"""Reading the message behind a CK for revive: a typed read (``ReadResult``) by (topic, queue, queue offset).

``MessageReader`` is the seam: revive asks it for one message and gets FOUND (checked to be the one at the
requested offset), NOT_FOUND (gone for good) or FAILED (with ``need_retry``); ``read_many`` reads several
offsets of one queue at once. ``LocalMessageReader`` reads this broker's store; ``cluster.remote_reader.
RemoteMessageReader`` reads another broker group's (``read_routing`` picks one per CK).
Any exception while reading becomes a FAILED read with ``need_retry`` (RocketMQ #10985 skipped the CK).
"""

from __future__ import annotations

import logging
from typing import Protocol

from pocketmq.common.read_result import (
    FailureReason,
    NotFoundCause,
    ReadResult,
    check_offset,
)
from pocketmq.store.api import GetStatus

log = logging.getLogger(__name__)

_NOT_FOUND_CAUSES = {
    GetStatus.OFFSET_TOO_SMALL: NotFoundCause.BELOW_MIN_OFFSET,
    GetStatus.MESSAGE_WAS_REMOVING: NotFoundCause.BELOW_MIN_OFFSET,
    GetStatus.NO_MATCHED_LOGIC_QUEUE: NotFoundCause.TOPIC_GONE,
    GetStatus.NO_MESSAGE_IN_QUEUE: NotFoundCause.BEYOND_MAX_OFFSET,
    GetStatus.OFFSET_OVERFLOW_ONE: NotFoundCause.BEYOND_MAX_OFFSET,
    GetStatus.OFFSET_OVERFLOW_BADLY: NotFoundCause.BEYOND_MAX_OFFSET,
}


class MessageReader(Protocol):
    async def read(self, topic: str, queue_id: int, queue_offset: int) -> ReadResult:
        """The message at exactly ``queue_offset`` of (topic, queue_id), as a typed result; never raises."""

    async def read_many(self, topic: str, queue_id: int, queue_offsets: list[int]) -> dict[int, ReadResult]:
        """``read`` of each of ``queue_offsets`` (one queue), in as few round trips as the reader can."""


class LocalMessageReader:
    def __init__(self, store):
        self._store = store

    async def read(self, topic: str, queue_id: int, queue_offset: int) -> ReadResult:
        try:
            got = self._store.get_messages(topic, queue_id, queue_offset, 1)
            if got.status is GetStatus.FOUND and got.records:
                return check_offset(ReadResult.found(got.messages()[0]), queue_offset)
        except Exception as exc:  # a read that raised is a failed read, never a skipped one
            log.warning(
                "event=revive_read_raised topic=%s queue=%d offset=%d error=%r", topic, queue_id, queue_offset, exc
            )
            return ReadResult.failed(FailureReason.EXCEPTION, f"{type(exc).__name__}: {exc}")
        cause = _NOT_FOUND_CAUSES.get(got.status)
        if cause is not None:
            return ReadResult.not_found(cause, f"store answered {got.status.value}")
        # OFFSET_FOUND_NULL, or FOUND without a record: the unit could not be read this time.
        return ReadResult.failed(FailureReason.IO_ERROR, f"store answered {got.status.value}")

    async def read_many(self, topic: str, queue_id: int, queue_offsets: list[int]) -> dict[int, ReadResult]:
        # A local read does not block and costs no round trip: one offset at a time keeps the checks simple.
        return {offset: await self.read(topic, queue_id, offset) for offset in queue_offsets}

    def __repr__(self) -> str:
        return "<LocalMessageReader>"
