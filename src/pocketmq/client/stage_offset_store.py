"""Where a staged-concurrent consumer keeps its stage progress: one ``StageOffsetRecord`` per queue.

- ``RemoteStageOffsetStore`` (clustering): QUERY_STAGE_OFFSETS / UPDATE_STAGE_OFFSETS (PocketMQ codes, see
  docs/protocol.md) to the queue's broker, so a queue that moves to another consumer resumes its stages.
- ``LocalFileStageOffsetStore`` (broadcasting): ``<dir>/<client id>/<group>/stage_offsets.json`` rewritten
  atomically, next to the consumed offsets of ``LocalFileOffsetStore``.

A record holds the stage offsets valid at a queue offset (its ``commitOffset``), written as one unit, so the
consumer restarts from that queue offset with matching stage offsets (client/stages.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pocketmq.client.stages import StageOffsetRecord
from pocketmq.common.message import MessageQueue
from pocketmq.protocol.codes import QUERY_STAGE_OFFSETS, UPDATE_STAGE_OFFSETS, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import GroupQueueRequestHeader
from pocketmq.runtime.files import atomic_write_bytes


class RemoteStageOffsetStore:
    def __init__(self, instance, group: str):
        self._instance = instance
        self._group = group

    def _header(self, mq: MessageQueue) -> dict[str, str]:
        return GroupQueueRequestHeader.ext_fields(consumer_group=self._group, topic=mq.topic, queue_id=mq.queue_id)

    async def read(self, mq: MessageQueue) -> StageOffsetRecord | None:
        response = await self._instance.invoke_broker(
            mq.broker_name, RemotingCommand.request(QUERY_STAGE_OFFSETS, self._header(mq))
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        expect_success(response)
        return StageOffsetRecord.from_json(json.loads(response.body))

    async def write(self, mq: MessageQueue, record: StageOffsetRecord) -> None:
        response = await self._instance.invoke_broker(
            mq.broker_name,
            RemotingCommand.request(UPDATE_STAGE_OFFSETS, self._header(mq), json.dumps(record.to_json()).encode()),
        )
        expect_success(response)


class LocalFileStageOffsetStore:
    def __init__(self, base_dir: Path, client_id: str, group: str):
        self.path = Path(base_dir) / client_id.replace("@", "_").replace(":", "_") / group / "stage_offsets.json"
        self._records: dict[MessageQueue, StageOffsetRecord] | None = None

    def _load(self) -> dict[MessageQueue, StageOffsetRecord]:
        if self._records is None:
            self._records = {}
            try:
                data = json.loads(self.path.read_bytes())
            except FileNotFoundError:
                data = {}
            for entry in data.get("queues", []):
                mq = MessageQueue(entry["topic"], entry["brokerName"], int(entry["queueId"]))
                self._records[mq] = StageOffsetRecord.from_json(entry)
        return self._records

    async def read(self, mq: MessageQueue) -> StageOffsetRecord | None:
        return self._load().get(mq)

    async def write(self, mq: MessageQueue, record: StageOffsetRecord) -> None:
        records = self._load()
        records[mq] = record
        entries = [
            {"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id, **r.to_json()}
            for q, r in sorted(records.items())
        ]
        os.makedirs(self.path.parent, exist_ok=True)
        atomic_write_bytes(self.path, json.dumps({"queues": entries}, indent=1).encode())
