"""Where a push consumer keeps its consumed offsets: on the brokers (clustering) or in a local file
(broadcasting, where every instance consumes everything and has its own position).

Both keep an in-memory table updated as messages are done (``update``, increase-only by default) and
``persist`` it: ``RemoteOffsetStore`` asks the broker as RocketMQ clients do (a group that never committed
reads 0 while the queue still starts at 0, so a new group sees a young topic from its start) and sends UPDATE_CONSUMER_OFFSET to each queue's broker,
``LocalFileOffsetStore`` rewrites ``<dir>/<client id>/<group>/offsets.json`` atomically. ``read`` answers
from memory, else from the backing store, else None (no position yet).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from pocketmq.common.errors import ClientError, RemotingError
from pocketmq.common.message import MessageQueue
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader
from pocketmq.runtime.files import atomic_write_bytes

log = logging.getLogger(__name__)


class _OffsetTable:
    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        if offset < 0:
            return
        current = self.table.get(mq)
        if current is None or not increase_only or offset > current:
            self.table[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)


class RemoteOffsetStore(_OffsetTable):
    def __init__(self, instance, group: str):
        super().__init__()
        self._instance = instance
        self._group = group

    async def read(self, mq: MessageQueue) -> int | None:
        if mq in self.table:
            return self.table[mq]
        response = await self._instance.invoke_broker(
            mq.broker_name,
            RemotingCommand.request(
                RequestCode.QUERY_CONSUMER_OFFSET,
                QueryConsumerOffsetRequestHeader.ext_fields(
                    consumer_group=self._group, topic=mq.topic, queue_id=mq.queue_id
                ),
            ),
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        expect_success(response)
        offset = int(response.ext_fields["offset"])
        self.table[mq] = offset
        return offset

    async def persist(self, mqs) -> None:
        for mq in list(mqs):
            offset = self.table.get(mq)
            if offset is None:
                continue
            try:
                await self._instance.invoke_broker(
                    mq.broker_name,
                    RemotingCommand.request(
                        RequestCode.UPDATE_CONSUMER_OFFSET,
                        UpdateConsumerOffsetRequestHeader.ext_fields(
                            consumer_group=self._group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=offset
                        ),
                    ),
                )
            except (RemotingError, RemoteServerError, ClientError) as exc:  # the next round tries again
                log.warning("event=offset_persist_failed mq=%s offset=%d error=%s", mq, offset, exc)


class LocalFileOffsetStore(_OffsetTable):
    def __init__(self, base_dir: Path, client_id: str, group: str):
        super().__init__()
        self.path = Path(base_dir) / client_id.replace("@", "_").replace(":", "_") / group / "offsets.json"
        self._loaded = False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return
        for entry in data.get("offsetTable", []):
            mq = MessageQueue(entry["topic"], entry["brokerName"], int(entry["queueId"]))
            self.table.setdefault(mq, int(entry["offset"]))

    async def read(self, mq: MessageQueue) -> int | None:
        self._load()
        return self.table.get(mq)

    async def persist(self, mqs=None) -> None:
        self._load()
        entries = [
            {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset}
            for mq, offset in sorted(self.table.items())
        ]
        os.makedirs(self.path.parent, exist_ok=True)
        atomic_write_bytes(self.path, json.dumps({"offsetTable": entries}, indent=1).encode())
