"""Transactions on the gRPC port: half messages of v2 producers, EndTransaction, and checks pushed to them as a
``recover_orphaned_transaction_command`` on their Telemetry stream (../shared/reference/transactions.md §10).

- A SendMessage entry of type TRANSACTION is stored as a half message whose ``PGROUP`` is its topic (v2 has no
  producer group, as in RocketMQ's proxy), with ``CHECK_IMMUNITY_TIME_IN_SECONDS`` from
  ``orphaned_transaction_recovery_duration`` (whole seconds; over ``transaction_max_recovery_s``: BAD_REQUEST).
  Its entry's ``transaction_id`` is the message id.
- EndTransaction finds the half message by topic and transaction id in this broker's index (the proxy keeps them
  30 s in memory; here any half message of the broker is found). A blank transaction id is
  INVALID_TRANSACTION_ID, so is one that names no half message of the topic; UNSPECIFIED does nothing and
  answers OK (the proxy forwards it as 0, the broker ignores it); an ending after another one answers OK and
  changes nothing (the proxy answers OK to whatever it forwards). Anything else the broker refuses gets its
  code: HA_NOT_AVAILABLE on a slave, BAD_REQUEST after the check immunity, INTERNAL_SERVER_ERROR when the
  ending could not be stored.
- Checks: a v2 producer whose Settings publish topic T is a producer of group T, so it gets the checks of T's
  half messages through its session's outbox; its checker's EndTransaction (SOURCE_SERVER_CHECK) ends it.
"""

from __future__ import annotations

import logging

from pocketmq.broker.transaction.channels import HalfCheck
from pocketmq.broker.transaction.decision import Commit, EndRequest
from pocketmq.broker.transaction.records import CHECK_IMMUNITY_SECONDS, check_view, producer_group
from pocketmq.common import properties as props
from pocketmq.common.errors import BadRequestError
from pocketmq.common.message import Message
from pocketmq.protocol.codes import ResponseCode, V2StatusCode
from pocketmq.protocol.grpc_codec import InboundMessage, encode_delivered_message
from pocketmq.protocol.grpc_transaction_codec import (
    decode_end_transaction,
    end_transaction_response,
    recover_orphaned_transaction,
)
from pocketmq.runtime.rate_limited_log import RateLimitedLog
from pocketmq.server.sessions import Session, SessionRegistry

log = logging.getLogger(__name__)
_refusals = RateLimitedLog(log, 10.0)

_COMMIT_OF = {"COMMIT": Commit.COMMIT, "ROLLBACK": Commit.ROLLBACK}
_V2_CODE_OF = {
    ResponseCode.SUCCESS: V2StatusCode.OK,
    ResponseCode.SLAVE_NOT_AVAILABLE: V2StatusCode.HA_NOT_AVAILABLE,
    ResponseCode.ILLEGAL_OPERATION: V2StatusCode.BAD_REQUEST,
}
PRODUCER = "PRODUCER"


def as_half_message(msg: Message, inbound: InboundMessage, max_recovery_s: int) -> None:
    """Make a validated TRANSACTION entry's message a half message request (in place)."""
    msg.properties[props.TRANSACTION_PREPARED] = "true"
    msg.properties[props.PRODUCER_GROUP] = inbound.topic
    if inbound.orphaned_recovery_ms is not None:
        seconds = inbound.orphaned_recovery_ms // 1000
        if not 0 <= seconds <= max_recovery_s:
            raise BadRequestError(
                f"orphaned transaction recovery duration {seconds} s is outside [0, {max_recovery_s}]"
            )
        msg.properties[CHECK_IMMUNITY_SECONDS] = str(seconds)


class TransactionRpcs:
    def __init__(self, broker, sessions: SessionRegistry):
        self._broker = broker
        self._sessions = sessions
        broker.transaction_channels.add_source(self._producer_channels)

    def _producer_channels(self, group: str) -> list:
        return [
            GrpcCheckChannel(s)
            for s in self._sessions.sessions()
            if s.client_type == PRODUCER and group in s.topics and s.outbox is not None
        ]

    async def end_transaction(self, request, context):
        end = decode_end_transaction(request)
        if not end.transaction_id.strip():
            return self._refused(end, V2StatusCode.INVALID_TRANSACTION_ID, "transaction id is blank")
        service = self._broker.transactions
        half = service.find_half(end.topic, end.transaction_id)
        if half is None:
            return self._refused(
                end,
                V2StatusCode.INVALID_TRANSACTION_ID,
                f"no half message of topic {end.topic} has this transaction id",
            )
        # UNSPECIFIED (or an unknown value) is RocketMQ's 0: nothing is done, a check decides
        commit = _COMMIT_OF.get(end.resolution, Commit.UNKNOWN)
        outcome = await service.end(
            EndRequest(
                producer_group(half), half.queue_offset, half.phys_offset, commit, end.from_check, end.transaction_id
            )
        )
        code = _V2_CODE_OF.get(outcome.code, V2StatusCode.INTERNAL_SERVER_ERROR)
        return end_transaction_response(code, outcome.remark)

    @staticmethod
    def _refused(end, code: int, message: str):
        _refusals.warning(
            str(code),
            "event=grpc_end_transaction_refused topic=%s transaction_id=%r code=%d reason=%s",
            end.topic,
            end.transaction_id,
            code,
            message,
        )
        return end_transaction_response(code, message)


class GrpcCheckChannel:
    """A v2 producer's Telemetry stream, as a place to send checks."""

    def __init__(self, session: Session):
        self._session = session

    @property
    def is_open(self) -> bool:
        outbox = self._session.outbox
        return outbox is not None and not outbox.closed

    @property
    def writable(self) -> bool:
        outbox = self._session.outbox
        return outbox is not None and outbox.has_room

    def send_check(self, check: HalfCheck) -> bool:
        message = encode_delivered_message(check_view(check.half))
        return self._session.push(recover_orphaned_transaction(message, check.transaction_id))

    def __repr__(self) -> str:
        return f"<GrpcCheckChannel {self._session.client_id}>"
