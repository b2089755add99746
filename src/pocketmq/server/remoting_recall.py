"""Remoting handler of RECALL_MESSAGE (370, RocketMQ 5): cancel a delayed message before it is due.

Header ``producerGroup``, ``topic``, ``recallHandle`` (from the send reply's ``recallHandle``), ``bname``.
SUCCESS with ``msgId`` (the recalled message's id; a second recall of it answers the same); ILLEGAL_OPERATION
for a handle this broker did not issue, of another topic, or of a message already due (too late), as RocketMQ
answers; SERVICE_NOT_AVAILABLE on a slave that does not act as master.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.request_headers import RecallMessageRequestHeader
from pocketmq.protocol.transport import RemotingConnection, RequestRouter

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


class RecallHandlers:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def register(self, router: RequestRouter) -> None:
        router.register(RequestCode.RECALL_MESSAGE, self.recall_message)

    async def recall_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = RecallMessageRequestHeader.parse(request.ext_fields)
        message_id, _ = await self._broker.timer.recall_by_handle(h.recall_handle, h.topic)
        return request.response(ResponseCode.SUCCESS, {"msgId": message_id})
