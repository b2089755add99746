"""Remoting handlers of staged-concurrent consumers (PocketMQ codes, docs/protocol.md, docs/staged.md).

- QUERY_STAGE_OFFSETS (30200): header ``consumerGroup``, ``topic``, ``queueId``. SUCCESS with the queue's
  record as JSON body (``{"commitOffset", "stageOffsets": [{"strategy", "stageGroup", "stageOffset"}]}``),
  or QUERY_NOT_FOUND when the group never stored one for that queue.
- UPDATE_STAGE_OFFSETS (30201): the same header, the record as JSON body; it replaces the stored record.
- REGISTER_POP_STAGES (30210): header ``consumerGroup``, ``topic``, ``restartStages`` (optional bool); body
  ``{"stageDefinitions": [sizes]}``. The group's pops of the topic follow the stages from now on (POP form).
  SUCCESS with ``{"stageDefinitions", "origins": {"queue id": queue offset where its sequence starts}}``.
- UNREGISTER_POP_STAGES (30211): header ``consumerGroup``, ``topic``: back to plain POP; QUERY_NOT_FOUND when
  nothing was registered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.common.errors import BadRequestError
from pocketmq.protocol.codes import (
    QUERY_STAGE_OFFSETS,
    REGISTER_POP_STAGES,
    UNREGISTER_POP_STAGES,
    UPDATE_STAGE_OFFSETS,
    ResponseCode,
)
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.remoting_headers import json_body, json_bytes
from pocketmq.protocol.request_headers import (
    GroupQueueRequestHeader,
    GroupTopicRequestHeader,
    RegisterPopStagesRequestHeader,
)
from pocketmq.protocol.transport import RemotingConnection, RequestRouter

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker


def _group_topic_queue(request: RemotingCommand) -> tuple[str, str, int]:
    h = GroupQueueRequestHeader.parse(request.ext_fields)
    return h.consumer_group, h.topic, h.queue_id


class StageOffsetHandlers:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def register(self, router: RequestRouter) -> None:
        router.register(QUERY_STAGE_OFFSETS, self.query_stage_offsets)
        router.register(UPDATE_STAGE_OFFSETS, self.update_stage_offsets)
        router.register(REGISTER_POP_STAGES, self.register_pop_stages)
        router.register(UNREGISTER_POP_STAGES, self.unregister_pop_stages)

    async def query_stage_offsets(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        record = self._broker.stage_offsets.query(*_group_topic_queue(request))
        if record is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, remark="no stage offsets for this queue")
        return request.response(ResponseCode.SUCCESS, body=json_bytes(record))

    async def update_stage_offsets(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        self._broker.stage_offsets.update(*_group_topic_queue(request), json_body(request.body, "stage offsets"))
        return request.response(ResponseCode.SUCCESS)

    async def register_pop_stages(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = RegisterPopStagesRequestHeader.parse(request.ext_fields)
        body = json_body(request.body, "stage definitions")
        if not isinstance(body, dict) or "stageDefinitions" not in body:
            raise BadRequestError("the body needs stageDefinitions (a list of stage sizes)")
        staged = self._broker.pop.staged.register(
            h.consumer_group, h.topic, body["stageDefinitions"], restart=h.restart_stages
        )
        return request.response(ResponseCode.SUCCESS, body=json_bytes(staged.to_json()))

    async def unregister_pop_stages(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = GroupTopicRequestHeader.parse(request.ext_fields)
        if not self._broker.pop.staged.unregister(h.consumer_group, h.topic):
            return request.response(ResponseCode.QUERY_NOT_FOUND, remark="no stages registered")
        return request.response(ResponseCode.SUCCESS)
