"""The admin codes about a group's online consumers (docs/protocol.md), served on the broker's remoting port.

- GET_CONSUMER_CONNECTION_LIST: the group's live clients (id, address, language, version, protocol) and what it
  consumes, the official 5.x clients on the gRPC port included (as RocketMQ's proxy registers them).
- INVOKE_BROKER_TO_RESET_OFFSET: store the group's new offsets of a topic (``broker.offset_reset``) and send
  each online remoting consumer of the group RESET_CONSUMER_CLIENT_OFFSET with them, oneway as RocketMQ does.
- GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY: passed on to the one client named, whose answer comes
  back as it is; CONSUME_MESSAGE_DIRECTLY first reads the message named by its offset message id here and sends
  it as the body.

Offset tables are RocketMQ's ``ResetOffsetBody``, keyed by message queue objects as fastjson writes them
(``protocol/queue_tables.py``), so RocketMQ's clients and ``mqadmin`` read them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.broker.clients import ClientChannel
from pocketmq.broker.consumers import ConsumerGroupInfo
from pocketmq.broker.offset_reset import reset_group_offsets
from pocketmq.common.errors import BadRequestError
from pocketmq.common.message import MessageQueue, parse_offset_msg_id
from pocketmq.common.record import encode_record
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.consumer_admin_headers import (
    ClientRequestHeader,
    ConsumeMessageDirectlyRequestHeader,
    ResetOffsetRequestHeader,
)
from pocketmq.protocol.queue_tables import dumps_with_queue_tables
from pocketmq.protocol.remoting_headers import json_bytes
from pocketmq.protocol.request_headers import GroupRequestHeader
from pocketmq.protocol.transport import RemotingConnection, RequestRouter

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

# How long the broker waits for a client's running info or direct consumption (a listener may be slow);
# RocketMQ's admin waits as long.
CLIENT_CALL_TIMEOUT_S = 10.0


class ConsumerAdminHandlers:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def register(self, router: RequestRouter) -> None:
        for code, handler in (
            (RequestCode.GET_CONSUMER_CONNECTION_LIST, self.get_consumer_connection_list),
            (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, self.invoke_broker_to_reset_offset),
            (RequestCode.GET_CONSUMER_RUNNING_INFO, self.get_consumer_running_info),
            (RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_message_directly),
        ):
            router.register(code, handler)

    async def get_consumer_connection_list(self, conn: RemotingConnection, request: RemotingCommand):
        group = GroupRequestHeader.parse(request.ext_fields).consumer_group
        online = self._broker.consumers.online(group)
        if not online:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE, remark=f"no consumer of group {group} is online")
        # The group's remoting heartbeats say how it consumes; a group of gRPC clients only consumes by POP.
        info = self._broker.consumers.table.group_info(group) or ConsumerGroupInfo(group, consume_type="CONSUME_POP")
        subscriptions = {sub.topic: sub for c in online for sub in c.subscriptions} | info.subscriptions
        body = {
            "connectionSet": [
                {
                    "clientId": c.client_id,
                    "clientAddr": c.address,
                    "language": c.language,
                    "version": c.version,
                    "lastHeartbeatTimestamp": c.last_heartbeat_ms,
                    "protocol": c.protocol,  # not in RocketMQ's Connection; its clients ignore unknown fields
                }
                for c in online
            ],
            "subscriptionTable": {
                topic: {"topic": topic, "subString": sub.expression, "expressionType": sub.expression_type}
                for topic, sub in sorted(subscriptions.items())
            },
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "consumeFromWhere": info.consume_from_where,
        }
        return request.response(ResponseCode.SUCCESS, body=json_bytes(body))

    async def invoke_broker_to_reset_offset(self, conn: RemotingConnection, request: RemotingCommand):
        h = ResetOffsetRequestHeader.parse(request.ext_fields)
        broker = self._broker
        queues = reset_group_offsets(broker, h.group, h.topic, h.timestamp_ms, force=h.is_force)
        table = {MessageQueue(h.topic, broker.broker_name, queue_id): offset for queue_id, offset in queues.items()}
        told = 0
        for channel in broker.consumers.table.clients(h.group):
            client_conn = channel.connection
            if isinstance(client_conn, RemotingConnection) and not client_conn.is_closed:
                body = dumps_with_queue_tables({}, {"offsetTable": table})
                client_conn.invoke_oneway(
                    RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(request.ext_fields), body)
                )
                told += 1
        return request.response(
            ResponseCode.SUCCESS, body=dumps_with_queue_tables({"consumersNotified": told}, {"offsetTable": table})
        )

    async def get_consumer_running_info(self, conn: RemotingConnection, request: RemotingCommand):
        h = ClientRequestHeader.parse(request.ext_fields)
        return await self._call_client(request, self._client(h.consumer_group, h.client_id), request.body)

    async def consume_message_directly(self, conn: RemotingConnection, request: RemotingCommand):
        h = ConsumeMessageDirectlyRequestHeader.parse(request.ext_fields)
        try:
            _, phys_offset = parse_offset_msg_id(h.msg_id)
        except ValueError as exc:
            raise BadRequestError(f"header field msgId={h.msg_id!r}: {exc}") from None
        channel = self._client(h.consumer_group, h.client_id)
        message = self._broker.store.read_message(phys_offset) if phys_offset >= 0 else None
        if message is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, remark=f"no message {h.msg_id} on this broker")
        return await self._call_client(request, channel, encode_record(message))

    def _client(self, group: str, client_id: str) -> ClientChannel | None:
        channel = self._broker.consumers.table.find(group, client_id)
        if channel is None or not isinstance(channel.connection, RemotingConnection) or channel.connection.is_closed:
            return None
        return channel

    async def _call_client(self, request: RemotingCommand, channel: ClientChannel | None, body: bytes):
        """``request`` (its code and fields) to the client of ``channel`` with ``body``; its answer as ours."""
        if channel is None:
            fields = request.ext_fields
            return request.response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                remark=f"client {fields.get('clientId')} of group {fields.get('consumerGroup')} is not online here",
            )
        assert isinstance(channel.connection, RemotingConnection)
        answer = await channel.connection.invoke(
            RemotingCommand.request(request.code, dict(request.ext_fields), body), CLIENT_CALL_TIMEOUT_S
        )
        return request.response(answer.code, dict(answer.ext_fields), body=answer.body, remark=answer.remark)
