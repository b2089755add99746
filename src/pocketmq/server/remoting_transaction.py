"""Transactions on the remoting port: END_TRANSACTION (37), CHECK_TRANSACTION_STATE (39) to 4.x and SDK producers,
and the operators' RESUME_CHECK_HALF_MESSAGE (323) and GET_TRANSACTION_STATUS (PocketMQ's 30500).

- END_TRANSACTION comes **oneway** from every client (never answered then; the transport drops the reply); a
  client that asks for an answer gets one. Its fields go to ``TransactionService.end`` unchanged.
- A check goes oneway on the connection a producer of the half message's group heart-beat on (``broker.producers``,
  registered as a ``ProducerChannels`` source): header ``tranStateTableOffset`` / ``commitLogOffset`` /
  ``offsetMsgId`` of the half record, ``msgId`` and ``transactionId`` its UNIQ_KEY, ``topic`` its real topic,
  ``bname``; body one record in the pull layout with the real topic and queue and every property (``PGROUP``,
  ``UNIQ_KEY``, ``TRAN_MSG`` ...). The Java client answers with a new oneway END_TRANSACTION on it.
- GET_TRANSACTION_STATUS: JSON ``{"brokerName", "pending": {topic: {"pending", "oldestBornMs"}}, "discarded":
  [...]}``, the newest ``maxDiscarded`` put-aside messages, each with its offset message id (what RESUME names),
  real topic, transaction id, producer group, reason, checks, born and store times.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from pocketmq.broker.transaction.channels import HalfCheck
from pocketmq.broker.transaction.decision import Commit, EndRequest
from pocketmq.broker.transaction.records import (
    CHECK_TIMES,
    DISCARD_REASON,
    HALF_QUEUE_OFFSET,
    check_view,
    producer_group,
    real_topic,
    transaction_id,
)
from pocketmq.broker.transaction.service import EndOutcome
from pocketmq.common.errors import BadRequestError
from pocketmq.common.message import parse_offset_msg_id
from pocketmq.common.record import encode_record
from pocketmq.protocol.codes import GET_TRANSACTION_STATUS, RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.remoting_headers import json_bytes
from pocketmq.protocol.request_headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    GetTransactionStatusRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
)
from pocketmq.protocol.transport import RemotingConnection, RequestRouter
from pocketmq.runtime.rate_limited_log import RateLimitedLog

log = logging.getLogger(__name__)
_bad_requests = RateLimitedLog(log, 10.0)


class TransactionHandlers:
    def __init__(self, broker) -> None:
        self._broker = broker
        broker.transaction_channels.add_source(self._producer_channels)

    def register(self, router: RequestRouter) -> None:
        router.register(RequestCode.END_TRANSACTION, self.end_transaction)
        router.register(RequestCode.RESUME_CHECK_HALF_MESSAGE, self.resume_check_half_message)
        router.register(GET_TRANSACTION_STATUS, self.transaction_status)

    def _producer_channels(self, group: str) -> list:
        return [
            RemotingCheckChannel(c.connection)
            for c in self._broker.producers.clients(group)
            if isinstance(c.connection, RemotingConnection)
        ]

    def end_transaction(self, conn: RemotingConnection, request: RemotingCommand):
        """The reply at once under ASYNC_FLUSH (no task per END_TRANSACTION), else an awaitable of it."""
        try:
            h = EndTransactionRequestHeader.parse(request.ext_fields)
        except BadRequestError as exc:  # oneway: the client never reads the answer, so the log says it
            _bad_requests.warning(
                "header", "event=end_transaction_bad_header remote=%s error=%s", conn.remote_address, exc
            )
            raise
        outcome = self._broker.transactions.end_nowait(
            EndRequest(
                h.producer_group,
                h.tran_state_table_offset,
                h.commit_log_offset,
                Commit(int(h.commit_or_rollback)),
                h.from_transaction_check,
                h.transaction_id,
            )
        )
        if isinstance(outcome, EndOutcome):
            return None if request.is_oneway else request.response(outcome.code, remark=outcome.remark or None)
        return _reply_when_ended(request, outcome)

    async def resume_check_half_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = ResumeCheckHalfMessageRequestHeader.parse(request.ext_fields)
        try:
            _, phys_offset = parse_offset_msg_id(h.msg_id)
        except ValueError as exc:
            raise BadRequestError(f"header field msgId={h.msg_id!r}: {exc}") from None
        result = await self._broker.transactions.resume(phys_offset, self._broker.messages.send)
        return request.response(
            ResponseCode.SUCCESS, {"queueOffset": result.queue_offset, "transactionId": result.transaction_id}
        )

    async def transaction_status(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = GetTransactionStatusRequestHeader.parse(request.ext_fields)
        service = self._broker.transactions
        discarded = service.discarded(h.max_discarded) if h.max_discarded else []
        body = {
            "brokerName": self._broker.broker_name,
            "pending": await service.pending_by_topic(),
            "discarded": [
                {
                    "offsetMsgId": m.offset_msg_id,
                    "topic": real_topic(m),
                    "transactionId": transaction_id(m),
                    "producerGroup": producer_group(m),
                    "reason": m.properties.get(DISCARD_REASON, ""),
                    "checks": int(m.properties.get(CHECK_TIMES, "0") or 0),
                    "halfQueueOffset": int(m.properties.get(HALF_QUEUE_OFFSET, "-1") or -1),
                    "bornTimestamp": m.born_timestamp_ms,
                    "storeTimestamp": m.store_timestamp_ms,
                }
                for m in discarded
            ],
        }
        return request.response(ResponseCode.SUCCESS, body=json_bytes(body))


async def _reply_when_ended(request: RemotingCommand, outcome: Awaitable[EndOutcome]) -> RemotingCommand:
    ended = await outcome
    return request.response(ended.code, remark=ended.remark or None)


class RemotingCheckChannel:
    """A producer's remoting connection, as a place to send checks."""

    def __init__(self, conn: RemotingConnection):
        self._conn = conn

    @property
    def is_open(self) -> bool:
        return not self._conn.is_closed

    @property
    def writable(self) -> bool:
        return self._conn.writable

    def send_check(self, check: HalfCheck) -> bool:
        if self._conn.is_closed:
            return False
        self._conn.invoke_oneway(check_command(check))
        return True

    def __repr__(self) -> str:
        return f"<RemotingCheckChannel {self._conn.remote_address}>"


def check_command(check: HalfCheck) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE for ``check`` (see the module doc)."""
    half = check.half
    view = check_view(half)
    fields = CheckTransactionStateRequestHeader.ext_fields(
        tran_state_table_offset=half.queue_offset,
        commit_log_offset=half.phys_offset,
        offset_msg_id=half.offset_msg_id,
        msg_id=check.transaction_id,
        transaction_id=check.transaction_id,
        topic=view.topic,
        broker_name=check.broker_name,
    )
    return RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, fields, encode_record(view))
