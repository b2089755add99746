"""Transactions through the proxy: half messages sent for v2 producers, EndTransaction over remoting
END_TRANSACTION, and the brokers' CHECK_TRANSACTION_STATE relayed to a producer's Telemetry stream.

- The producer group of a v2 half message is its topic (v2 has no producer group, as in RocketMQ's proxy). A
  worker whose clients publish topic T heart-beats to the brokers as a producer of group T, so a broker sends
  T's checks to one of the workers that has such clients.
- END_TRANSACTION names the half record by its broker and offsets, which a v2 EndTransaction does not carry: the
  worker remembers them by transaction id (the message id) from the send's reply and from every check it
  relays, as RocketMQ's proxy does, for up to ``capacity`` transactions (the oldest are forgotten first). A
  client's calls all come on its one connection, so the worker that sent its half message (or relayed its check)
  is the one that ends it; an id the worker does not know is INVALID_TRANSACTION_ID, and the broker's check
  settles the transaction later.
- A check goes to one live producer session of this worker that publishes the topic, as a
  ``recover_orphaned_transaction_command``; with none it is dropped (the broker checks again later).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import OrderedDict
from dataclasses import dataclass

from pocketmq.client.instance import ClientInstance
from pocketmq.client.producer import SendResult
from pocketmq.client.transaction_producer import read_check
from pocketmq.common import properties as props
from pocketmq.common.errors import PocketMQError
from pocketmq.common.message import parse_offset_msg_id
from pocketmq.protocol.codes import RequestCode, V2StatusCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import v2_code_of
from pocketmq.protocol.grpc_codec import encode_delivered_message
from pocketmq.protocol.grpc_transaction_codec import (
    decode_end_transaction,
    end_transaction_response,
    recover_orphaned_transaction,
)
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import EndTransactionRequestHeader
from pocketmq.protocol.transport import RemotingConnection
from pocketmq.server.sessions import SessionRegistry

log = logging.getLogger(__name__)

DEFAULT_CAPACITY = 100_000
_COMMIT_OR_ROLLBACK = {"COMMIT": "8", "ROLLBACK": "12"}  # anything else is 0: nothing is done, a check decides
PRODUCER = "PRODUCER"


@dataclass(frozen=True, slots=True)
class HalfRecord:
    """Where a half message is: what END_TRANSACTION names."""

    broker_name: str
    topic: str
    tran_state_table_offset: int
    commit_log_offset: int


class ProxyTransactions:
    def __init__(
        self,
        instance: ClientInstance,
        sessions: SessionRegistry,
        request_timeout_s: float,
        capacity: int = DEFAULT_CAPACITY,
    ):
        self._instance = instance
        self._sessions = sessions
        self._timeout_s = request_timeout_s
        self._capacity = capacity
        self._halves: OrderedDict[str, HalfRecord] = OrderedDict()
        self._published: set[str] = set()  # topics this worker is a producer of (never unregistered: a check
        # for a topic without a live producer is dropped, and the broker asks again)
        self._turn = itertools.count()
        instance.request_handlers[RequestCode.CHECK_TRANSACTION_STATE] = self._on_check

    # -- half messages ----------------------------------------------------------------------------------------------
    def remember_send(self, transaction_id: str, topic: str, result: SendResult) -> None:
        _, commit_log_offset = parse_offset_msg_id(result.offset_msg_id)
        self._remember(
            transaction_id, HalfRecord(result.message_queue.broker_name, topic, result.queue_offset, commit_log_offset)
        )

    def _remember(self, transaction_id: str, record: HalfRecord) -> None:
        self._halves[transaction_id] = record
        self._halves.move_to_end(transaction_id)
        while len(self._halves) > self._capacity:
            self._halves.popitem(last=False)

    async def publish(self, topics: tuple[str, ...]) -> None:
        """A producer of this worker publishes ``topics``: be a producer of their groups on their brokers."""
        new = [t for t in topics if t not in self._published]
        if not new:
            return
        for topic in new:
            self._published.add(topic)
            self._instance.register_producer(topic)
        await asyncio.gather(*(self._instance.route(t) for t in new), return_exceptions=True)
        await self._instance.heartbeat_all()

    # -- EndTransaction ---------------------------------------------------------------------------------------------
    async def end_transaction(self, request, context):
        end = decode_end_transaction(request)
        if not end.transaction_id.strip():
            return end_transaction_response(V2StatusCode.INVALID_TRANSACTION_ID, "transaction id is blank")
        record = self._halves.get(end.transaction_id)
        if record is None or record.topic != end.topic:
            return end_transaction_response(
                V2StatusCode.INVALID_TRANSACTION_ID,
                f"no half message of topic {end.topic} with this transaction id passed this proxy worker",
            )
        commit = _COMMIT_OR_ROLLBACK.get(end.resolution, "0")
        fields = EndTransactionRequestHeader.ext_fields(
            producer_group=record.topic,
            tran_state_table_offset=record.tran_state_table_offset,
            commit_log_offset=record.commit_log_offset,
            commit_or_rollback=commit,
            from_transaction_check=end.from_check,
            msg_id=end.message_id or end.transaction_id,
            transaction_id=end.transaction_id,
            topic=record.topic,
            broker_name=record.broker_name,
        )
        try:
            expect_success(
                await self._instance.invoke_broker(
                    record.broker_name, RemotingCommand.request(RequestCode.END_TRANSACTION, fields), self._timeout_s
                )
            )
        except PocketMQError as exc:
            return end_transaction_response(v2_code_of(exc), str(exc))
        if commit != "0":
            self._halves.pop(end.transaction_id, None)
        return end_transaction_response(V2StatusCode.OK)

    # -- checks -----------------------------------------------------------------------------------------------------
    def _on_check(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        read = read_check(conn, request)
        if read is None:
            return None
        check, message = read
        group = message.properties.get(props.PRODUCER_GROUP, "")
        transaction_id = check.transaction_id or message.properties.get(props.UNIQ_KEY, "")
        broker_name = check.broker_name or self._broker_at(conn.remote_address)
        if not transaction_id or broker_name is None:
            log.warning("event=proxy_transaction_check_unusable group=%s from=%s", group, conn.remote_address)
            return None
        producers = [
            s
            for s in self._sessions.sessions()
            if s.client_type == PRODUCER and group in s.topics and s.outbox is not None and s.outbox.has_room
        ]
        if not producers:
            log.info("event=proxy_transaction_check_dropped reason=no_producer group=%s", group)
            return None
        self._remember(
            transaction_id,
            HalfRecord(broker_name, message.topic, check.tran_state_table_offset, check.commit_log_offset),
        )
        producer = producers[next(self._turn) % len(producers)]
        producer.push(recover_orphaned_transaction(encode_delivered_message(message), transaction_id))
        return None  # a check is oneway: the answer is the client's EndTransaction

    def _broker_at(self, address: str) -> str | None:
        return next((name for name, addr in self._instance.broker_addrs.items() if addr == address), None)
