"""Remoting handler of gray release's view for ``pocketmq group describe`` (PocketMQ code, docs/protocol.md).

- GET_GROUP_GRAY_CLIENTS (30400): header ``consumerGroup``. SUCCESS with the JSON body ``{"brokerName",
  "split": bool, "ratio", "clients": [{"clientId", "gray", "assignedBy", "queues": [[topic, queueId]]}]}``:
  the group's live clients on this broker (remoting and gRPC), whether each is gray, and the queues of this
  broker it holds (``assignedBy`` ``client``: a push consumer's report) or may pop (``broker``: its POP share).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.protocol.codes import GET_GROUP_GRAY_CLIENTS, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.remoting_headers import json_bytes
from pocketmq.protocol.request_headers import GroupRequestHeader
from pocketmq.protocol.transport import RemotingConnection, RequestRouter

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


class GrayHandlers:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def register(self, router: RequestRouter) -> None:
        router.register(GET_GROUP_GRAY_CLIENTS, self.group_gray_clients)

    async def group_gray_clients(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = GroupRequestHeader.parse(request.ext_fields).consumer_group
        broker = self._broker

        split = broker.gray.split(group)
        body = {
            "brokerName": broker.broker_name,
            "split": split.active,
            "ratio": split.ratio,
            "clients": broker.gray.describe(group, broker.topics.get),
        }
        return request.response(ResponseCode.SUCCESS, body=json_bytes(body))
