"""Typed reads: what reading one message by (topic, queue, queue offset) can tell its caller.

RocketMQ's revive and escape bridge could only tell *found* from *not found*, so a read that failed for a
passing reason (broker restarting, timeout) either dropped the message or was retried forever
(apache/rocketmq #8460). PocketMQ's reads, local and remote alike, answer one of three things:

- ``FOUND``: the message, which is the one at the requested offset (RocketMQ #7724 read *from* an offset and
  could return a later message; readers must check, ``ReadResult.found`` does not guess).
- ``NOT_FOUND``: gone for good, with a ``NotFoundCause``; retrying cannot help.
- ``FAILED``: not read this time, with a ``FailureReason``, a description and a suggested ``retry_delay_ms``;
  trying again may help (``need_retry``), which justifies postponing work (a CK rewrite). Every failure a
  reader can see may pass (the broker comes back, the permission is granted), so there is no FAILED read that
  must not be retried: a read that can never succeed is NOT_FOUND.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pocketmq.common.message import MessageExt


class ReadStatus(enum.Enum):
    FOUND = "FOUND"
    NOT_FOUND = "NOT_FOUND"
    FAILED = "FAILED"


class NotFoundCause(enum.Enum):
    BELOW_MIN_OFFSET = "BELOW_MIN_OFFSET"  # retention removed it
    TOPIC_GONE = "TOPIC_GONE"  # the topic or queue no longer exists
    BEYOND_MAX_OFFSET = "BEYOND_MAX_OFFSET"  # never written (a CK that points past the queue)


class FailureReason(enum.Enum):
    BROKER_ADDR_UNKNOWN = "BROKER_ADDR_UNKNOWN"
    CONNECTION_REFUSED = "CONNECTION_REFUSED"
    TIMEOUT = "TIMEOUT"
    BROKER_BUSY = "BROKER_BUSY"
    NO_PERMISSION = "NO_PERMISSION"
    GROUP_UNREACHABLE = "GROUP_UNREACHABLE"  # the master and every slave of the group
    BREAKER_OPEN = "BREAKER_OPEN"  # not tried: the broker failed too often lately
    IO_ERROR = "IO_ERROR"
    OFFSET_MISMATCH = "OFFSET_MISMATCH"  # a record came back, but not the one asked for
    STORE_BUSY = "STORE_BUSY"
    EXCEPTION = "EXCEPTION"  # anything unexpected while reading is a failed read, never a skipped one


@dataclass(frozen=True, slots=True)
class ReadResult:
    status: ReadStatus
    message: MessageExt | None = None
    not_found_cause: NotFoundCause | None = None
    failure: FailureReason | None = None
    description: str = ""
    retry_delay_ms: int = 0
    code: int | None = None  # the remote response code, when there was one

    @classmethod
    def found(cls, message: MessageExt) -> ReadResult:
        return cls(ReadStatus.FOUND, message=message)

    @classmethod
    def not_found(cls, cause: NotFoundCause, description: str = "") -> ReadResult:
        return cls(ReadStatus.NOT_FOUND, not_found_cause=cause, description=description)

    @classmethod
    def failed(
        cls,
        reason: FailureReason,
        description: str = "",
        *,
        retry_delay_ms: int = 0,
        code: int | None = None,
    ) -> ReadResult:
        return cls(ReadStatus.FAILED, failure=reason, description=description, retry_delay_ms=retry_delay_ms, code=code)

    @property
    def need_retry(self) -> bool:
        """Whether reading again later may succeed: a FAILED read (see the module docstring)."""
        return self.status is ReadStatus.FAILED

    @property
    def reason(self) -> str:
        """One word for logs, metrics and dead-letter properties."""
        if self.status is ReadStatus.FOUND:
            return "FOUND"
        cause = self.not_found_cause if self.status is ReadStatus.NOT_FOUND else self.failure
        return cause.value if cause else self.status.value


def check_offset(result: ReadResult, queue_offset: int) -> ReadResult:
    """A FOUND read of another offset than the one asked for is a failed read (RocketMQ #7724)."""
    if result.status is ReadStatus.FOUND and result.message is not None and result.message.queue_offset != queue_offset:
        return ReadResult.failed(
            FailureReason.OFFSET_MISMATCH, f"asked for offset {queue_offset}, got {result.message.queue_offset}"
        )
    return result
