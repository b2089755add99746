"""The POP form of staged concurrency (docs/staged.md): ``StagedSimpleConsumer``, a ``SimpleConsumer`` that
registers stage definitions for its group on every broker serving its topics when it starts
(REGISTER_POP_STAGES; a group without master through its slave acting as master, or, while that slave does not
act, when the first message comes from it). From then on the brokers hand out each queue stage by stage: messages of the current
stage only (to any number of consumers at once), nothing of the next stage until every message of the
current one is acked or dead-lettered. A message neither acked nor changed comes back after its invisible
time in place (same queue offset, ``reconsume_times`` + 1), so it stays in its stage.

Every message of a queue belongs to the queue's one staged sequence: stages count queue positions from the
sequence's *origin* (the group's position on the queue when the stages were first registered, or when a
consumer starts with ``restart_stages=True``: a new sale). ``stage_of(msg)`` says which stage a message is in.

>>> with StagedSimpleConsumer("prize-group", {"orders": "*"}, [10, 20, 70], config) as consumer:
...     for msg in consumer.receive(1, invisible_duration_ms=30_000):
...         award(msg, consumer.stage_of(msg))
...         consumer.ack(msg)
"""

from __future__ import annotations

import json
import logging

from pocketmq.client.config import ClientConfig
from pocketmq.client.simple_consumer import BROKER_NAME_PROPERTY, MAX_RECEIVE, AsyncSimpleConsumer, SimpleConsumer
from pocketmq.common.errors import ClientError, PocketMQError
from pocketmq.common.message import MessageExt
from pocketmq.common.stages import check_definitions, stage_index
from pocketmq.protocol.codes import REGISTER_POP_STAGES
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import RegisterPopStagesRequestHeader

log = logging.getLogger(__name__)


class AsyncStagedSimpleConsumer(AsyncSimpleConsumer):
    """The asyncio staged simple consumer; ``stage_definitions`` apply to every subscribed topic."""

    def __init__(
        self,
        group: str,
        subscriptions: dict[str, str],
        stage_definitions: list[int],
        config: ClientConfig | None = None,
        *,
        restart_stages: bool = False,
        await_duration_ms: int = 20_000,
    ):
        try:
            self.stage_definitions = check_definitions(stage_definitions)
        except ValueError as exc:
            raise ClientError(str(exc)) from None
        super().__init__(group, subscriptions, config, await_duration_ms=await_duration_ms)
        self.restart_stages = restart_stages
        self._origins: dict[tuple[str, str, int], int] = {}  # (broker name, topic, queue id) -> origin offset

    async def start(self) -> None:
        if self._instance is not None:
            return
        await super().start()
        for topic in self.subscriptions:
            route = await self.instance.route(topic)
            for broker_name in route.readable_broker_names:
                try:
                    await self._register(topic, broker_name)
                except PocketMQError as exc:
                    if broker_name in route.master_addrs:
                        raise
                    # a slave that does not act as master hands out nothing: registered when it first does
                    log.info(
                        "event=pop_stages_registration_deferred broker=%s topic=%s error=%s", broker_name, topic, exc
                    )

    async def _register(self, topic: str, broker_name: str) -> None:
        body = json.dumps({"stageDefinitions": self.stage_definitions}).encode()
        request = RemotingCommand.request(
            REGISTER_POP_STAGES,
            RegisterPopStagesRequestHeader.ext_fields(
                consumer_group=self.group, topic=topic, restart_stages=self.restart_stages
            ),
            body=body,
        )
        reply = json.loads(expect_success(await self.instance.invoke_broker(broker_name, request)).body)
        for queue_id, origin in reply["origins"].items():
            self._origins[(broker_name, topic, int(queue_id))] = origin

    async def receive(
        self, max_count: int = MAX_RECEIVE, invisible_duration_ms: int = 30_000, *, await_duration_ms: int | None = None
    ) -> list[MessageExt]:
        messages = await super().receive(max_count, invisible_duration_ms, await_duration_ms=await_duration_ms)
        for msg in messages:  # from a broker (or a queue) not registered at start: register there now
            broker_name, topic = msg.properties.get(BROKER_NAME_PROPERTY), self.namespace.wrap(msg.topic)
            if broker_name is not None and (broker_name, topic, msg.queue_id) not in self._origins:
                await self._register(topic, broker_name)
        return messages

    def stage_of(self, msg: MessageExt) -> int:
        """The stage of a received message (``len(stage_definitions)``: the unbounded last stage)."""
        broker_name = msg.properties.get(BROKER_NAME_PROPERTY)
        topic = self.namespace.wrap(msg.topic)
        origin = self._origins.get((broker_name, topic, msg.queue_id)) if broker_name is not None else None
        if origin is None:
            raise ClientError("the message was not received by this staged consumer")
        return -1 if msg.queue_offset < origin else stage_index(self.stage_definitions, msg.queue_offset - origin)

    def __repr__(self) -> str:
        return (
            f"<AsyncStagedSimpleConsumer group={self.group} topics={sorted(self.subscriptions)} "
            f"stages={self.stage_definitions}>"
        )


class StagedSimpleConsumer(SimpleConsumer):
    """The synchronous staged simple consumer (receive / ack / ack_batch / change_invisible_duration as
    ``SimpleConsumer``); safe to share between threads, each calling ``receive`` for its own messages."""

    def __init__(
        self,
        group: str,
        subscriptions: dict[str, str],
        stage_definitions: list[int],
        config: ClientConfig | None = None,
        *,
        restart_stages: bool = False,
        await_duration_ms: int = 20_000,
    ):
        super(SimpleConsumer, self).__init__(
            AsyncStagedSimpleConsumer(
                group,
                subscriptions,
                stage_definitions,
                config,
                restart_stages=restart_stages,
                await_duration_ms=await_duration_ms,
            )
        )

    def stage_of(self, msg: MessageExt) -> int:
        return self.core.stage_of(msg)

    def __repr__(self) -> str:
        return f"<StagedSimpleConsumer {self.core!r}>"
