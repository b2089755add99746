"""The check service's decisions, pure and in virtual time: when a half message is checked, when it is given up,
and whether an END_TRANSACTION may end it.

``decide(half, settings, now_ms)`` for one pending half message:

- stored longer ago than the store's file reserved time: DISCARD ``EXPIRED``, checked or not (its record is about
  to go with retention; RocketMQ measures from the born time, which a producer's clock may put anywhere);
- before its next check is due: WAIT until then. The first check is due ``transactionTimeOut`` after the
  message was born, or after its immunity (``CHECK_IMMUNITY_TIME_IN_SECONDS``) when that is longer; each next
  one ``transactionCheckInterval`` after the last;
- due, with ``transactionCheckMax`` checks done already: DISCARD ``MAX_CHECKS``;
- else CHECK.

So with RocketMQ's defaults (6 s, 30 s, 15) a message is checked at 6 s, 36 s, 66 s ... 15 times, and put aside
at ~7.5 min, as RocketMQ's rounds do (there the first check falls 6-36 s after the send, as the round comes).
Unlike RocketMQ, an immunity does not use up checks: the waiting costs nothing here, where RocketMQ re-appends
the message each round of it and counts that as a check.

``end_refusal`` is EndTransactionProcessor's checks of an END_TRANSACTION against the half record it names, in
its order; ``None`` lets it through.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pocketmq.broker.transaction.records import (
    DiscardReason,
    immunity_ms,
    is_half_record,
    producer_group,
    transaction_id,
)
from pocketmq.common.message import MessageExt
from pocketmq.protocol.codes import ResponseCode


@dataclass(frozen=True, slots=True)
class CheckSettings:
    timeout_ms: int = 6_000  # transactionTimeOut: the youngest a half message is checked at
    interval_ms: int = 30_000  # transactionCheckInterval: between two checks of one message
    check_max: int = 15  # transactionCheckMax: checks before the message is put aside
    file_reserved_ms: int = 72 * 3_600_000  # the store's retention: older half messages are put aside unchecked


@dataclass(slots=True)
class HalfState:
    """What the check decision needs of one pending half message."""

    born_ms: int  # the producer's born time, never later than the store time (a producer's clock may run ahead)
    stored_ms: int
    immunity_ms: int = 0
    checks: int = 0  # checks done (here, or carried from where the message was before)
    last_check_ms: int = 0  # 0: never checked here


class Verdict(enum.Enum):
    WAIT = "WAIT"
    CHECK = "CHECK"
    DISCARD = "DISCARD"


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    at_ms: int = 0  # WAIT: when to decide again
    reason: DiscardReason | None = None  # DISCARD: why


CHECK = Decision(Verdict.CHECK)


def next_check_ms(half: HalfState, settings: CheckSettings) -> int:
    """When ``half``'s next check is due."""
    first = half.born_ms + max(settings.timeout_ms, half.immunity_ms)
    if half.last_check_ms == 0:
        return first
    return max(first, half.last_check_ms + settings.interval_ms)


def decide(half: HalfState, settings: CheckSettings, now_ms: int) -> Decision:
    expires_ms = half.stored_ms + settings.file_reserved_ms
    if now_ms > expires_ms:
        return Decision(Verdict.DISCARD, reason=DiscardReason.EXPIRED)
    due_ms = next_check_ms(half, settings)
    if now_ms < due_ms:
        return Decision(Verdict.WAIT, at_ms=min(due_ms, expires_ms + 1))
    if half.checks >= settings.check_max:
        return Decision(Verdict.DISCARD, reason=DiscardReason.MAX_CHECKS)
    return CHECK


class Commit(enum.IntEnum):
    """END_TRANSACTION's ``commitOrRollback``: the sys flag's transaction bits."""

    UNKNOWN = 0
    COMMIT = 8
    ROLLBACK = 12


@dataclass(frozen=True, slots=True)
class EndRequest:
    """An END_TRANSACTION (or a gRPC EndTransaction, in the same terms)."""

    producer_group: str
    half_queue_offset: int  # tranStateTableOffset
    phys_offset: int  # commitLogOffset
    commit: Commit
    from_check: bool
    transaction_id: str | None = None  # checked when given: PocketMQ's, RocketMQ reads no id


@dataclass(frozen=True, slots=True)
class Refusal:
    code: int
    remark: str
    reason: str  # one word, for the metrics and the log


NOT_FOUND = Refusal(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed", "NOT_FOUND")


def end_refusal(half: MessageExt | None, request: EndRequest, now_ms: int, timeout_ms: int) -> Refusal | None:
    """Why ``request`` may not end ``half`` (the record at its ``commitLogOffset``, None: none there), or None."""
    if half is None or not is_half_record(half):
        return NOT_FOUND
    immunity = immunity_ms(half)
    if not request.from_check and immunity and now_ms - half.born_timestamp_ms > max(immunity, timeout_ms):
        return Refusal(
            ResponseCode.ILLEGAL_OPERATION,
            f"the transaction's check immunity ({immunity // 1000} s) is over: a check decides it",
            "IMMUNITY_OVER",
        )
    if producer_group(half) != request.producer_group:
        return Refusal(ResponseCode.SYSTEM_ERROR, "The producer group wrong", "PRODUCER_GROUP")
    if half.queue_offset != request.half_queue_offset:
        return Refusal(ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong", "QUEUE_OFFSET")
    if half.phys_offset != request.phys_offset:
        return Refusal(ResponseCode.SYSTEM_ERROR, "The commit log offset wrong", "COMMIT_LOG_OFFSET")
    given = request.transaction_id
    if given and given != transaction_id(half) and given != half.offset_msg_id:
        return Refusal(ResponseCode.SYSTEM_ERROR, "The transaction id wrong", "TRANSACTION_ID")
    return None
