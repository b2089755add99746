"""Push consumers: ``AsyncPushConsumer`` (asyncio core) and ``PushConsumer`` (synchronous facade).

RocketMQ's DefaultMQPushConsumer on a pull loop. For each subscribed topic (and, in clustering mode, the
group's ``%RETRY%<group>``) the consumer rebalances: it lists the topic's read queues from the route and the
group's consumer ids from a broker (GET_CONSUMER_LIST_BY_GROUP), keeps the queues the allocation strategy
(``client/rebalance.py``; averagely by default, always inside a ``GrayAllocator`` so gray consumers get only gray
queues: docs/gray.md) gives its client id, and drops the rest. Rebalancing runs at
start, every ``rebalance_interval_ms`` and at once when a broker sends NOTIFY_CONSUMER_IDS_CHANGED. In
broadcasting mode every instance takes every queue.

Each owned queue has a ``ProcessQueue`` and a pull task: it long-polls PULL_MESSAGE (committing the consumed
offset in the same request), puts what it got into the process queue, and hands it to the consume service
(``client/consume_service.py``: concurrent or orderly listener; ``client/staged_consume_service.py``:
staged-concurrent listener, docs/staged.md). Pulling pauses while the process queue holds more than
``pull_threshold_for_queue`` messages or ``pull_threshold_size_for_queue_bytes``. Retried messages
come back from ``%RETRY%<group>`` with their original topic restored, as RocketMQ clients show them.

Offsets: the smallest offset still in a process queue is the consumed position (``client/offset_store.py``:
on the brokers for clustering, a local file for broadcasting), persisted every ``persist_interval_ms``, when
a queue is dropped, and at shutdown. A new queue starts at the stored offset; without one, at
``consume_from_where``.

Orderly listeners lock their queues on the broker (LOCK_BATCH_MQ, renewed every ``lock_renew_interval_ms``)
before consuming and unlock them when dropped.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.client.config import ClientConfig
from pocketmq.client.consume_service import ConcurrentConsumeService, OrderlyConsumeService
from pocketmq.client.consumer_requests import serve_consumer_requests, stop_serving
from pocketmq.client.consumer_tracing import ConsumerTracing
from pocketmq.client.instance import (
    ClientInstance,
    ConsumerData,
    acquire_instance,
    checked_subscriptions,
    release_instance,
)
from pocketmq.client.listener import StagedConcurrentListener
from pocketmq.client.loop_thread import SyncFacade
from pocketmq.client.offset_store import LocalFileOffsetStore, RemoteOffsetStore
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.pull_consumer import PullStatus, pull_result_from_response
from pocketmq.client.rebalance import AllocateStrategy, GrayAllocator, allocate_averagely
from pocketmq.client.selector import MessageSelector, as_selector
from pocketmq.client.stage_offset_store import LocalFileStageOffsetStore, RemoteStageOffsetStore
from pocketmq.client.staged_consume_service import StagedConsumeService
from pocketmq.common import properties as props
from pocketmq.common.errors import ClientError, PocketMQError
from pocketmq.common.message import MessageExt, MessageQueue
from pocketmq.common.namespace import Namespace
from pocketmq.common.properties import encode_properties
from pocketmq.common.topic import (
    DEFAULT_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    group_name_problem,
    retry_topic,
    topic_name_problem,
)
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import (
    ConsumerSendMsgBackRequestHeader,
    GroupRequestHeader,
    PullMessageRequestHeader,
    PullSysFlag,
    QueueRequestHeader,
    SendMessageRequestHeaderV2,
)
from pocketmq.runtime.periodic import PeriodicTask, spawn_watched

log = logging.getLogger(__name__)

_RETRY_BASE_LEVEL = 3
_CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"  # RocketMQ's producer group of a client's own sends


class MessageModel(enum.Enum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"


@dataclass(frozen=True)
class PushConsumerOptions:
    """RocketMQ's DefaultMQPushConsumer settings (same defaults unless said)."""

    group: str
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    allocate_strategy: AllocateStrategy = allocate_averagely
    consume_thread_max: int = 20  # listener threads; for an `async def` listener, the calls awaited at once
    consume_batch_size: int = 1  # consumeMessageBatchMaxSize: the most messages of one listener call
    pull_batch_size: int = 32
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue_bytes: int = 100 * 1024 * 1024
    long_poll_ms: int = 15_000  # brokerSuspendMaxTimeMillis
    pull_delay_on_error_ms: int = 3000
    flow_control_delay_ms: int = 50
    # -1: the group's retryMaxTimes (the broker's, 16 unless `pocketmq group create --retry-max-times`) for
    # concurrent listeners, 16 local retries for staged ones, unlimited local retries for orderly ones
    max_reconsume_times: int = -1
    suspend_current_queue_time_ms: int = 1000
    local_retry_delay_ms: int = 5000  # a message whose send-back failed is consumed again locally this much later
    rebalance_interval_ms: int = 20_000
    persist_interval_ms: int = 5000
    lock_renew_interval_ms: int = 20_000
    offset_store_dir: Path = field(default_factory=lambda: Path(os.path.expanduser("~/.pocketmq_offsets")))

    def __post_init__(self) -> None:
        problem = group_name_problem(self.group)
        if problem:
            raise ClientError(f"consumer group: {problem}")
        if self.consume_thread_max < 1 or self.consume_batch_size < 1 or not 1 <= self.pull_batch_size <= 1024:
            raise ClientError("consume_thread_max, consume_batch_size >= 1 and pull_batch_size in [1, 1024]")


class AsyncPushConsumer:
    """The asyncio push consumer: ``subscribe``, ``register_listener`` (or ``register_orderly_listener``),
    ``await start()``, ``await shutdown()``."""

    def __init__(
        self,
        options: PushConsumerOptions,
        config: ClientConfig | None = None,
        *,
        instance: ClientInstance | None = None,
    ):
        self.options = options
        self.config = config or ClientConfig()
        self.namespace = Namespace(self.config.namespace)
        self.group = self.namespace.wrap(options.group)
        self._instance = instance
        self._owns_instance = instance is None
        self._subscriptions: dict[str, MessageSelector] = {}
        self._listener: Callable | None = None  # any kind (a StagedConcurrentListener is callable too)
        self._staged_listener: StagedConcurrentListener | None = None  # when the listener is staged
        self._orderly = False  # queues are locked on the broker (orderly and staged listeners)
        # Built at start (they need the instance); read before it, they are a ClientError.
        self._consume_service: ConcurrentConsumeService | OrderlyConsumeService | StagedConsumeService | None = None
        self._tracing: ConsumerTracing | None = None  # with config.enable_trace, once started
        self._offset_store: RemoteOffsetStore | LocalFileOffsetStore | None = None
        self._queues: dict[MessageQueue, ProcessQueue] = {}
        self._consumer_data: ConsumerData | None = None  # this consumer's heartbeat entry (set at start)
        self._pull_tasks: dict[MessageQueue, asyncio.Task] = {}
        self._tasks: list[PeriodicTask] = []  # rebalance, offsets, queue locks: built at start (the instance's clock)
        self._rebalancer: PeriodicTask | None = None
        self._rebalance_complete = False
        self._started = False

    @property
    def broadcasting(self) -> bool:
        return self.options.message_model is MessageModel.BROADCASTING

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise ClientError("push consumer is not started")
        return self._instance

    @property
    def consume_service(self) -> ConcurrentConsumeService | OrderlyConsumeService | StagedConsumeService:
        if self._consume_service is None:
            raise ClientError("push consumer is not started")
        return self._consume_service

    @property
    def offset_store(self) -> RemoteOffsetStore | LocalFileOffsetStore:
        if self._offset_store is None:
            raise ClientError("push consumer is not started")
        return self._offset_store

    # -- setup ----------------------------------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic``'s messages that ``expression`` selects: a tag expression (``a || b``) or a
        ``MessageSelector`` (``MessageSelector.by_sql("region = 'eu'")``)."""
        problem = topic_name_problem(topic)
        if problem:
            raise ClientError(problem)
        self._subscriptions[self.namespace.wrap(topic)] = as_selector(expression)

    def register_listener(self, listener) -> None:
        """A concurrent listener: ``listener(messages, ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus``;
        an ``async def`` one is awaited on the client's event loop (at most ``consume_thread_max`` at once)."""
        self._listener, self._orderly, self._staged_listener = listener, False, None

    def register_orderly_listener(self, listener) -> None:
        """An orderly listener: ``listener(messages, ConsumeOrderlyContext) -> ConsumeOrderlyStatus``."""
        self._listener, self._orderly, self._staged_listener = listener, True, None

    def register_staged_listener(self, listener: StagedConcurrentListener) -> None:
        """A staged-concurrent listener (``StagedConcurrentListener``, docs/staged.md): order between stages,
        concurrency inside a stage; queues are locked as for orderly listeners."""
        self._listener, self._orderly, self._staged_listener = listener, True, listener

    @property
    def assignment(self) -> list[MessageQueue]:
        return sorted(self.namespace.unwrap_queue(mq) for mq in self._queues)

    def _all_subscriptions(self) -> dict[str, MessageSelector]:
        subscriptions = dict(self._subscriptions)
        if not self.broadcasting:
            subscriptions[retry_topic(self.group)] = MessageSelector.by_tag()  # failed messages come back through it
        return subscriptions

    # -- lifecycle ------------------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        if self._listener is None or not self._subscriptions:
            raise ClientError("subscribe to a topic and register a listener before start()")
        instance = await acquire_instance(self.config) if self._owns_instance else self.instance
        await checked_subscriptions(instance, self.group, self._subscriptions, release=self._owns_instance)
        self._instance = instance
        opts = self.options
        if self.broadcasting:
            self._offset_store = LocalFileOffsetStore(opts.offset_store_dir, instance.client_id, self.group)
        else:
            self._offset_store = RemoteOffsetStore(instance, self.group)
        if self._staged_listener is not None:
            stage_store = (
                LocalFileStageOffsetStore(opts.offset_store_dir, instance.client_id, self.group)
                if self.broadcasting
                else RemoteStageOffsetStore(instance, self.group)
            )
            self._consume_service = StagedConsumeService(
                self,
                self._staged_listener,
                stage_store,
                threads=opts.consume_thread_max,
                batch_size=opts.consume_batch_size,
                suspend_ms=opts.suspend_current_queue_time_ms,
                max_reconsume_times=self._staged_retry_limit,  # bounded: a failing message never holds its stage for good
            )
        elif self._orderly:
            max_times = opts.max_reconsume_times  # -1 stays unlimited
            self._consume_service = OrderlyConsumeService(
                self,
                self._listener,
                threads=opts.consume_thread_max,
                batch_size=opts.consume_batch_size,
                suspend_ms=opts.suspend_current_queue_time_ms,
                max_reconsume_times=max_times,
            )
        else:
            self._consume_service = ConcurrentConsumeService(
                self,
                self._listener,
                threads=opts.consume_thread_max,
                batch_size=opts.consume_batch_size,
                local_retry_delay_ms=opts.local_retry_delay_ms,
            )
        consumer_data = self._consumer_data = ConsumerData(
            self.group,
            consume_type="CONSUME_PASSIVELY",
            message_model=opts.message_model.value,
            consume_from_where=opts.consume_from_where.value,
            subscriptions=self._all_subscriptions(),
            held_queues=[],
        )
        instance.register_consumer(consumer_data)
        instance.add_consumer_ids_listener(self._consumer_ids_changed)
        serve_consumer_requests(instance, self)
        for topic in self._subscriptions:
            try:
                await instance.route(topic)  # learn the brokers, so the heartbeat reaches them
            except PocketMQError as exc:
                log.warning("event=route_failed topic=%s error=%s", topic, exc)
        await instance.heartbeat_all()
        if self.config.enable_trace:
            self._tracing = await ConsumerTracing.start(self.config, instance)
            self._consume_service.tracing = (self._tracing.tracer, self.group)
        self._started = True
        # made before the first rebalance so that a NOTIFY_CONSUMER_IDS_CHANGED during it still makes a round (a
        # gray consumer's own heartbeat grows the retry topic, and the broker notifies once routes show it)
        self._rebalancer = self._periodic("rebalance", self._rebalance_round, self._rebalance_wait_ms)
        self._rebalance_complete = await self.rebalance()  # queues are assigned when start() returns
        self._tasks = [self._rebalancer, self._periodic("persist", self._persist_offsets, opts.persist_interval_ms)]
        if self._orderly and not self.broadcasting:
            self._tasks.append(self._periodic("lock", self._lock_assigned, opts.lock_renew_interval_ms))
        for task in self._tasks:
            task.start()
        log.info(
            "event=push_consumer_started group=%s model=%s orderly=%s topics=%s",
            self.group,
            opts.message_model.value,
            self._orderly,
            sorted(self._subscriptions),
        )

    async def shutdown(self) -> None:
        """Stop pulling, let listeners in flight finish, persist offsets, unlock, leave the group."""
        if not self._started:
            return
        self._started = False
        for task in self._pull_tasks.values():
            task.cancel()
        await asyncio.gather(*(task.stop() for task in self._tasks), *self._pull_tasks.values(), return_exceptions=True)
        self._tasks, self._pull_tasks, self._rebalancer = [], {}, None
        await self.consume_service.shutdown()
        if self._tracing is not None:
            await self._tracing.stop()
            self._tracing = None
        await self.offset_store.persist(list(self._queues))
        if self._orderly and not self.broadcasting:
            await self._unlock(list(self._queues))
        for pq in self._queues.values():
            pq.dropped = True
        self._queues.clear()
        self.instance.unregister_consumer(self.group)
        stop_serving(self.instance, self.group)
        if self._owns_instance:
            await release_instance(self.instance)
            self._instance = None
        log.info("event=push_consumer_stopped group=%s", self.group)

    async def __aenter__(self) -> AsyncPushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.shutdown()

    # -- rebalance ------------------------------------------------------------------------------------------------
    def _consumer_ids_changed(self, group: str) -> None:
        if group == self.group and self._rebalancer is not None:
            self._rebalancer.wake()

    def _periodic(self, name: str, action, interval_ms) -> PeriodicTask:
        return PeriodicTask(
            f"pocketmq-{name}-{self.group}", action, interval_ms, clock=self.instance.clock, expected=(PocketMQError,)
        )

    async def _rebalance_round(self) -> None:
        self._rebalance_complete = await self.rebalance()

    def _rebalance_wait_ms(self) -> int:
        """A rebalance that did not complete (a broker did not answer) is tried again within a second."""
        interval_ms = self.options.rebalance_interval_ms
        return interval_ms if self._rebalance_complete else min(1000, interval_ms)

    async def rebalance(self) -> bool:
        """One rebalance over every subscription; False when some topic could not be rebalanced."""
        if isinstance(self._consume_service, StagedConsumeService):  # stage definitions are read at each rebalance
            self._consume_service.reload_definitions()
        complete = True
        for topic in self._all_subscriptions():
            try:
                await self._rebalance_topic(topic)
            except PocketMQError as exc:
                complete = False
                log.info("event=rebalance_incomplete group=%s topic=%s error=%s", self.group, topic, exc)
        consumer_data = self._consumer_data
        if consumer_data is None:
            raise ClientError("push consumer is not started")
        if consumer_data.held_queues != self.assignment:  # tell the brokers now (group describe shows it)
            consumer_data.held_queues = self.assignment
            await self.instance.heartbeat_all()
        return complete

    async def _rebalance_topic(self, topic: str) -> None:
        route = await self.instance.route(topic, refresh=True)
        queues = list(route.read_queues)
        if self.broadcasting:
            mine = set(queues)
        else:
            ids = await self._consumer_ids(route.broker_names)
            if not ids:
                return
            mine = set(self._allocator(topic, route.gray_ratios)(queues, ids).get(self.instance.client_id, []))
        for mq in [mq for mq in self._queues if mq.topic == topic and mq not in mine]:
            await self._drop_queue(mq)
        for mq in sorted(mine - set(self._queues)):
            await self._add_queue(mq)

    def _allocator(self, topic: str, topic_ratios: Mapping[str, float]) -> AllocateStrategy:
        """The configured strategy inside a GrayAllocator: without a gray consumer in the group it gives the
        strategy's own result; with one, gray consumers get only gray queues and normal ones only the rest, by
        the topic's own ratio where its route carries one (``topic_ratios``). The group's retry topic is split
        by its gray retry queue (docs/gray.md)."""
        given = self.options.allocate_strategy
        if isinstance(given, GrayAllocator):  # a GrayAllocator given by hand: its strategy and ratio
            strategy, ratio = given.inner, given.ratio
        else:
            strategy, ratio = given, self.config.gray_queue_ratio
        return GrayAllocator(strategy, ratio, retry_split=topic == retry_topic(self.group), topic_ratios=topic_ratios)

    async def _consumer_ids(self, broker_names: list[str]) -> list[str]:
        for broker in broker_names:
            response = await self.instance.invoke_broker(
                broker,
                RemotingCommand.request(
                    RequestCode.GET_CONSUMER_LIST_BY_GROUP, GroupRequestHeader.ext_fields(consumer_group=self.group)
                ),
            )
            if response.code == ResponseCode.SUCCESS and response.body:
                ids = json.loads(response.body).get("consumerIdList") or []
                if ids:
                    return [str(i) for i in ids]
        return []

    async def _add_queue(self, mq: MessageQueue) -> None:
        offset = await self._start_offset(mq)
        pq = ProcessQueue()
        self._queues[mq] = pq
        if self._orderly and not self.broadcasting:
            await self._lock([mq])
        self._pull_tasks[mq] = spawn_watched(self._pull_loop(mq, pq, offset), f"pocketmq-pull-{mq}")
        log.info("event=queue_assigned group=%s mq=%s offset=%d", self.group, mq, offset)

    async def reset_offsets(self, offsets: dict[MessageQueue, int]) -> list[MessageQueue]:
        """An operator's reset (RESET_CONSUMER_CLIENT_OFFSET, ``client/consumer_requests.py``): each held queue of
        ``offsets`` forgets what it pulled (listeners in flight finish, but count for nothing) and pulls again
        from its new offset; returns the queues reset. The new offsets are committed too, for a RocketMQ broker,
        which leaves storing them to its consumers (a PocketMQ broker has stored them already, those of queues
        held elsewhere included)."""
        reset = []
        for mq, offset in sorted(offsets.items()):
            old = self._queues.get(mq)
            if old is None:
                continue
            old.dropped = True
            task = self._pull_tasks.pop(mq, None)
            if task is not None:
                task.cancel()
            self.offset_store.update(mq, offset, increase_only=False)
            await self.offset_store.persist([mq])
            if self._queues.get(mq) is not old:  # a rebalance dropped the queue meanwhile: its next owner reads it
                continue
            pq = self._queues[mq] = ProcessQueue()
            pq.locked = old.locked
            self._pull_tasks[mq] = spawn_watched(self._pull_loop(mq, pq, offset), f"pocketmq-pull-{mq}")
            log.info("event=queue_offset_reset group=%s mq=%s offset=%d", self.group, mq, offset)
            reset.append(mq)
        return reset

    @property
    def process_queues(self) -> dict[MessageQueue, ProcessQueue]:
        """The queues held and what each holds (running info, ``client/consumer_requests.py``)."""
        return dict(self._queues)

    @property
    def subscriptions(self) -> dict[str, MessageSelector]:
        """Topic -> its selector (a tag expression or SQL92), the group's retry topic included (clustering)."""
        return self._all_subscriptions()

    @property
    def listener(self) -> Callable | None:
        return self._listener

    @property
    def orderly(self) -> bool:
        return self._orderly

    async def _drop_queue(self, mq: MessageQueue) -> None:
        pq = self._queues.pop(mq)
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        service, offset_store = self.consume_service, self.offset_store
        if isinstance(service, StagedConsumeService):  # its listeners in flight finish and count before the unlock
            await service.drain(mq)
        pq.dropped = True
        await offset_store.persist([mq])
        offset_store.remove(mq)
        if self._orderly and not self.broadcasting:
            await self._unlock([mq])
        log.info("event=queue_dropped group=%s mq=%s", self.group, mq)

    async def _start_offset(self, mq: MessageQueue) -> int:
        service, offset_store = self.consume_service, self.offset_store
        if isinstance(service, StagedConsumeService):  # a stage record is valid at its own queue offset: resume there
            resume = await service.resume_offset(mq)  # (client/stages.py)
            if resume is not None:
                offset_store.update(mq, resume, increase_only=False)
                return resume
        stored = await offset_store.read(mq)
        if stored is not None and stored >= 0:
            return stored
        if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return 0
        if self.options.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            code = RequestCode.GET_MIN_OFFSET
        else:
            code = RequestCode.GET_MAX_OFFSET
        response = await self.instance.invoke_broker(
            mq.broker_name,
            RemotingCommand.request(code, QueueRequestHeader.ext_fields(topic=mq.topic, queue_id=mq.queue_id)),
        )
        expect_success(response)
        return int(response.ext_fields["offset"])

    # -- pulling --------------------------------------------------------------------------------------------------
    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        opts = self.options
        selector = self._all_subscriptions().get(mq.topic) or MessageSelector.by_tag()
        tags = selector.tags
        while not pq.dropped:
            if pq.count > opts.pull_threshold_for_queue or pq.size_bytes > opts.pull_threshold_size_for_queue_bytes:
                await asyncio.sleep(opts.flow_control_delay_ms / 1000)
                continue
            try:
                response = await self.instance.invoke_broker(
                    mq.broker_name,
                    self._pull_request(mq, offset, selector),
                    opts.long_poll_ms / 1000 + self.config.request_timeout_s,
                )
                result = pull_result_from_response(response, tags, offset)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broker down or a bad reply: pull this queue again a bit later
                log.warning("event=pull_failed mq=%s offset=%d error=%s", mq, offset, exc)
                await asyncio.sleep(opts.pull_delay_on_error_ms / 1000)
                continue
            if pq.dropped:
                return
            if result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning("event=pull_offset_moved mq=%s from=%d to=%d", mq, offset, result.next_begin_offset)
                self.offset_store.update(mq, result.next_begin_offset, increase_only=False)
            offset = result.next_begin_offset
            if result.messages:
                for msg in result.messages:
                    _restore_retry_topic(msg, self.group)
                    self.namespace.unwrap_message(msg)
                pq.add(result.messages)
                self.consume_service.submit(pq, mq, result.messages)
            elif pq.count == 0 and result.status is not PullStatus.OFFSET_ILLEGAL:
                self.offset_store.update(mq, offset)  # filtered-out messages are passed

    def _pull_request(self, mq: MessageQueue, offset: int, selector: MessageSelector) -> RemotingCommand:
        commit_offset = -1 if self.broadcasting else self.offset_store.table.get(mq, -1)
        return RemotingCommand.request(
            RequestCode.PULL_MESSAGE,
            PullMessageRequestHeader.ext_fields(
                consumer_group=self.group,
                topic=mq.topic,
                queue_id=mq.queue_id,
                queue_offset=offset,
                max_msg_nums=self.options.pull_batch_size,
                sys_flag=PullSysFlag.of(commit_offset=commit_offset > 0, suspend=True, subscription=True),
                commit_offset=max(commit_offset, 0),
                suspend_timeout_ms=self.options.long_poll_ms,
                subscription=selector.expression,
                sub_version=0,
                expression_type=selector.expression_type,
            ),
        )

    # -- hooks of the consume services ------------------------------------------------------------------------------
    def offset_done(self, mq: MessageQueue, offset: int) -> None:
        if mq in self._queues:
            self.offset_store.update(mq, offset)

    @property
    def _staged_retry_limit(self) -> int:
        """The staged listener's local retry limit: ``max_reconsume_times``, its -1 default being 16 (the client
        cannot read the group's retryMaxTimes: RocketMQ serves a group's config to admin requests only)."""
        return self.options.max_reconsume_times if self.options.max_reconsume_times >= 0 else 16

    async def send_back(self, msg: MessageExt, delay_level: int, mq: MessageQueue) -> bool:
        """Hand ``msg`` back to its broker (CONSUMER_SEND_MSG_BACK), else send the retry copy ourselves."""
        # Unset (-1): none is sent and the broker applies the group's retryMaxTimes (pocketmq group create).
        max_times = self.options.max_reconsume_times if self.options.max_reconsume_times >= 0 else None
        request = RemotingCommand.request(
            RequestCode.CONSUMER_SEND_MSG_BACK,
            ConsumerSendMsgBackRequestHeader.ext_fields(
                offset=msg.phys_offset,
                group=self.group,
                delay_level=delay_level,
                origin_msg_id=msg.msg_id,
                origin_topic=self.namespace.wrap(msg.topic),
                unit_mode=False,
                max_reconsume_times=max_times,
            ),
        )
        try:
            response = await self.instance.invoke_broker(mq.broker_name, request)
            if response.code == ResponseCode.SUCCESS:
                return True
            log.warning(
                "event=send_back_refused msg_id=%s code=%d remark=%s", msg.msg_id, response.code, response.remark
            )
        except PocketMQError as exc:
            log.warning("event=send_back_failed msg_id=%s error=%s", msg.msg_id, exc)
        return await self._send_retry_copy(msg, delay_level, mq, max_times)

    async def _send_retry_copy(
        self, msg: MessageExt, delay_level: int, mq: MessageQueue, max_times: int | None
    ) -> bool:
        """RocketMQ's client fallback: a plain send to ``%RETRY%<group>`` carrying the retry properties (without
        ``MAX_RECONSUME_TIMES`` when the consumer sets none: the broker applies the group's)."""
        properties = dict(msg.properties)
        properties.setdefault(props.RETRY_TOPIC, self.namespace.wrap(msg.topic))
        properties.setdefault(props.ORIGIN_MESSAGE_ID, msg.msg_id)
        properties.pop(props.MAX_RECONSUME_TIMES, None)
        if max_times is not None:
            properties[props.MAX_RECONSUME_TIMES] = str(max_times)
        properties[props.DELAY_TIME_LEVEL] = str(
            delay_level if delay_level > 0 else _RETRY_BASE_LEVEL + msg.reconsume_times
        )
        request = RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2,
            SendMessageRequestHeaderV2.ext_fields(
                producer_group=_CLIENT_INNER_PRODUCER_GROUP,
                topic=retry_topic(self.group),
                default_topic=DEFAULT_TOPIC,
                default_topic_queue_nums=1,
                queue_id=-1,
                sys_flag=0,
                born_timestamp_ms=self.instance.clock.now_ms(),
                flag=msg.flag,
                properties=encode_properties(properties),
                reconsume_times=msg.reconsume_times + 1,
                unit_mode=False,
                max_reconsume_times=max_times,
                batch=False,
            ),
            msg.body,
        )
        try:
            response = await self.instance.invoke_broker(mq.broker_name, request)
        except PocketMQError as exc:
            log.warning("event=retry_copy_failed msg_id=%s error=%s", msg.msg_id, exc)
            return False
        return response.code == ResponseCode.SUCCESS

    async def ensure_locked(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        if self.broadcasting:
            return True
        now_ms = self.instance.clock.monotonic_ms()
        if pq.locked and now_ms - pq.lock_renewed_ms < 30_000:  # RocketMQ's client lock max live time
            return True
        await self._lock([mq])
        return pq.locked

    async def _lock(self, mqs: list[MessageQueue]) -> None:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        now_ms = self.instance.clock.monotonic_ms()
        for broker, queues in by_broker.items():
            try:
                response = await self.instance.invoke_broker(
                    broker,
                    RemotingCommand.request(
                        RequestCode.LOCK_BATCH_MQ, body=_lock_body(self.group, self.instance.client_id, queues)
                    ),
                )
                locked_json = json.loads(response.body or b"{}").get("lockOKMQSet", [])
            except (PocketMQError, ValueError) as exc:
                log.warning("event=lock_failed broker=%s error=%s", broker, exc)
                continue
            locked = {MessageQueue(o["topic"], o["brokerName"], int(o["queueId"])) for o in locked_json}
            for mq in queues:
                pq = self._queues.get(mq)
                if pq is not None:
                    pq.locked = mq in locked
                    pq.lock_renewed_ms = now_ms if pq.locked else pq.lock_renewed_ms

    async def _unlock(self, mqs: list[MessageQueue]) -> None:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, queues in by_broker.items():
            try:
                await self.instance.invoke_broker(
                    broker,
                    RemotingCommand.request(
                        RequestCode.UNLOCK_BATCH_MQ, body=_lock_body(self.group, self.instance.client_id, queues)
                    ),
                )
            except PocketMQError as exc:
                log.info("event=unlock_failed broker=%s error=%s", broker, exc)

    async def _lock_assigned(self) -> None:
        await self._lock(list(self._queues))

    async def _persist_offsets(self) -> None:
        await self.offset_store.persist(list(self._queues))

    def __repr__(self) -> str:
        return (
            f"<AsyncPushConsumer group={self.group} model={self.options.message_model.value} "
            f"queues={len(self._queues)} started={self._started}>"
        )


def _lock_body(group: str, client_id: str, queues: list[MessageQueue]) -> bytes:
    return json.dumps(
        {
            "consumerGroup": group,
            "clientId": client_id,
            "onlyThisBroker": False,
            "mqSet": [{"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id} for q in queues],
        }
    ).encode()


def _restore_retry_topic(msg: MessageExt, group: str) -> None:
    """A retried message shows its original topic (RocketMQ's resetRetryAndNamespace)."""
    original = msg.properties.get(props.RETRY_TOPIC)
    if original and msg.topic == retry_topic(group):
        msg.topic = original


class PushConsumer(SyncFacade):
    """The synchronous push consumer: ``AsyncPushConsumer`` run on the process's client loop thread; a plain
    listener runs on the consumer's own thread pool, an ``async def`` one on the client loop thread.

    >>> consumer = PushConsumer(PushConsumerOptions("my-group"), ClientConfig(namesrv_addr="127.0.0.1:9876"))
    >>> consumer.subscribe("orders", "created || paid")
    >>> consumer.register_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    >>> consumer.start()
    """

    def __init__(self, options: PushConsumerOptions, config: ClientConfig | None = None):
        super().__init__(AsyncPushConsumer(options, config))

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self.core.subscribe(topic, expression)

    def register_listener(self, listener) -> None:
        self.core.register_listener(listener)

    def register_orderly_listener(self, listener) -> None:
        self.core.register_orderly_listener(listener)

    def register_staged_listener(self, listener) -> None:
        self.core.register_staged_listener(listener)

    def rebalance(self) -> bool:
        return self._loop.run(self.core.rebalance())

    @property
    def assignment(self) -> list[MessageQueue]:
        return self.core.assignment

    def __repr__(self) -> str:
        return f"<PushConsumer {self.core!r}>"
