"""Consume services of the push consumer: how pulled messages reach the listener and what a result does.

A consume service is a strategy object the consumer hands every pulled batch to (``submit``); it is started,
and shut down (waiting for listeners in flight) with the consumer. Two are here:

- ``ConcurrentConsumeService``: every pulled batch is cut into listener calls of ``consume_batch_size`` messages,
  run by the listener runner (``client/listener_runner.py``: ``consume_thread_max`` threads, or the event loop
  for an ``async def`` listener; the waiting call of the highest message priority goes first). A call that
  succeeded is settled on the loop at once (process queue, committable offset), no task per call. Failed messages (RECONSUME_LATER, or after ``ack_index``) are sent back to the broker in clustering mode
  (dropped with a warning in broadcasting mode); a message whose send-back fails stays in its process queue
  and is consumed again locally after ``local_retry_delay_ms`` (5 s), so it is never lost and the committed
  offset never passes it.
- ``OrderlyConsumeService``: one call at a time per queue, in offset order, only while the queue's broker
  lock is held (clustering). SUSPEND_CURRENT_QUEUE_A_MOMENT puts the batch back and pauses the queue; after
  ``max_reconsume_times`` local attempts (unlimited by default) the batch goes to the DLQ.

The staged-concurrent service (RIP-22) is the third, with the same ``submit``/``shutdown``:
``client/staged_consume_service.py``.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Protocol

from pocketmq.client.listener import (
    ConsumeConcurrentlyContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    failed_indexes,
)
from pocketmq.client.listener_runner import ListenerCall, listener_runner
from pocketmq.client.process_queue import ProcessQueue
from pocketmq.client.tracing import ClientTracer
from pocketmq.common.message import MessageExt, MessageQueue
from pocketmq.common.namespace import Namespace
from pocketmq.runtime.periodic import TaskFailures, watch_task

log = logging.getLogger(__name__)

DLQ_LEVEL = -1


class ConsumerHooks(Protocol):
    """What a consume service needs from its consumer."""

    @property
    def broadcasting(self) -> bool: ...

    @property
    def namespace(self) -> Namespace: ...  # the listener's context shows queues by the user's names

    async def send_back(self, msg: MessageExt, delay_level: int, mq: MessageQueue) -> bool: ...

    def offset_done(self, mq: MessageQueue, offset: int) -> None: ...

    async def ensure_locked(self, mq: MessageQueue, pq: ProcessQueue) -> bool: ...


class _ServiceBase:
    def __init__(self, hooks: ConsumerHooks, listener, *, threads: int, batch_size: int):
        self._hooks = hooks
        self._runner = listener_runner(listener, threads)
        self._batch_size = batch_size
        self._tasks: set[asyncio.Task] = set()
        self._failures = TaskFailures("pocketmq-consume")  # a task of this service ended by an error: reported
        self._timers: set[asyncio.TimerHandle] = set()
        self.consumed_total = 0

    @property
    def tracing(self) -> tuple[ClientTracer, str] | None:
        return self._runner.tracing

    @tracing.setter
    def tracing(self, value: tuple[ClientTracer, str] | None) -> None:  # (tracer, group) with config.enable_trace
        self._runner.tracing = value

    def _spawn(self, coro) -> asyncio.Task:
        task = watch_task(asyncio.get_running_loop().create_task(coro), self._failures)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _call_listener(self, messages: list[MessageExt], context):
        context.message_queue = self._hooks.namespace.unwrap_queue(context.message_queue)
        return await self._runner.call(messages, context)

    async def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop taking batches, let listeners in flight finish (bounded), release the pool."""
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        deadline = asyncio.get_running_loop().time() + timeout_s
        await self._runner.wait_idle(timeout_s)
        if self._tasks:  # what the last results started (send-backs)
            _, pending = await asyncio.wait(
                set(self._tasks), timeout=max(deadline - asyncio.get_running_loop().time(), 0)
            )
            for task in pending:
                task.cancel()
        self._runner.close()


class ConcurrentConsumeService(_ServiceBase):
    def __init__(
        self,
        hooks: ConsumerHooks,
        listener,
        *,
        threads: int = 20,
        batch_size: int = 1,
        local_retry_delay_ms: int = 5000,
    ):
        super().__init__(hooks, listener, threads=threads, batch_size=batch_size)
        self._local_retry_delay_ms = local_retry_delay_ms
        self.sent_back_total = 0
        self.local_retries_total = 0

    def submit(self, pq: ProcessQueue, mq: MessageQueue, messages: list[MessageExt]) -> None:
        if pq.dropped:
            return
        shown_mq = self._hooks.namespace.unwrap_queue(mq)  # the listener's context names queues as the user does
        for start in range(0, len(messages), self._batch_size):
            batch = messages[start : start + self._batch_size]
            context = ConsumeConcurrentlyContext(shown_mq)
            self._runner.start(ListenerCall(batch, context, partial(self._consumed, pq, mq, batch, context)))

    def _consumed(
        self, pq: ProcessQueue, mq: MessageQueue, batch: list[MessageExt], context: ConsumeConcurrentlyContext, status
    ) -> None:
        if pq.dropped:  # the queue moved to another consumer meanwhile: it consumes from the committed offset
            return
        self.consumed_total += len(batch)
        failed = [batch[i] for i in failed_indexes(status, context.ack_index, len(batch))]
        if failed and self._hooks.broadcasting:
            log.warning(
                "event=broadcast_consume_failed_dropped count=%d first_msg_id=%s", len(failed), failed[0].msg_id
            )
        elif failed:
            self._spawn(self._send_back(pq, mq, batch, failed, context.delay_level_when_next_consume))
            return
        offset = pq.remove(batch)
        if offset >= 0:
            self._hooks.offset_done(mq, offset)

    async def _send_back(
        self, pq: ProcessQueue, mq: MessageQueue, batch: list[MessageExt], failed: list[MessageExt], delay_level: int
    ) -> None:
        """Hand the failed messages back to the broker; one whose send-back fails is consumed again here later."""
        retry_locally: list[MessageExt] = []
        for msg in failed:
            if await self._hooks.send_back(msg, delay_level, mq):
                self.sent_back_total += 1
            else:
                msg.reconsume_times += 1
                retry_locally.append(msg)
        kept = {id(m) for m in retry_locally}
        offset = pq.remove([m for m in batch if id(m) not in kept])
        if offset >= 0:
            self._hooks.offset_done(mq, offset)
        if retry_locally:
            self.local_retries_total += len(retry_locally)
            log.warning(
                "event=send_back_failed_retry_locally count=%d delay_ms=%d",
                len(retry_locally),
                self._local_retry_delay_ms,
            )
            self._later(pq, mq, retry_locally)

    def _later(self, pq: ProcessQueue, mq: MessageQueue, messages: list[MessageExt]) -> None:
        def fire() -> None:
            self._timers.discard(handle)
            if not pq.dropped:
                self.submit(pq, mq, messages)

        handle = asyncio.get_running_loop().call_later(self._local_retry_delay_ms / 1000, fire)
        self._timers.add(handle)


class OrderlyConsumeService(_ServiceBase):
    def __init__(
        self,
        hooks: ConsumerHooks,
        listener,
        *,
        threads: int = 20,
        batch_size: int = 1,
        suspend_ms: int = 1000,
        max_reconsume_times: int = -1,
        lock_retry_ms: int = 100,
    ):
        super().__init__(hooks, listener, threads=threads, batch_size=batch_size)
        self._suspend_ms = suspend_ms
        self._max_reconsume_times = max_reconsume_times  # -1: unlimited (RocketMQ's orderly default)
        self._lock_retry_ms = lock_retry_ms
        self._running: set[MessageQueue] = set()

    def submit(self, pq: ProcessQueue, mq: MessageQueue, messages: list[MessageExt]) -> None:
        if mq not in self._running:
            self._running.add(mq)
            self._spawn(self._run_queue(pq, mq))

    async def _run_queue(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        try:
            while not pq.dropped:
                if not await self._hooks.ensure_locked(mq, pq):
                    await asyncio.sleep(self._lock_retry_ms / 1000)
                    continue
                batch = pq.take(self._batch_size)
                if not batch:
                    return
                context = ConsumeOrderlyContext(mq)
                status = await self._call_listener(batch, context)
                if pq.dropped:
                    return
                self.consumed_total += len(batch)
                if status is ConsumeOrderlyStatus.SUCCESS or await self._dead_letter_if_exhausted(batch, mq):
                    offset = pq.commit()
                    if offset >= 0:
                        self._hooks.offset_done(mq, offset)
                    continue
                for msg in batch:
                    msg.reconsume_times += 1
                pq.put_back(batch)
                suspend_ms = context.suspend_current_queue_time_ms
                await asyncio.sleep((suspend_ms if suspend_ms > 0 else self._suspend_ms) / 1000)
        finally:
            self._running.discard(mq)

    async def _dead_letter_if_exhausted(self, batch: list[MessageExt], mq: MessageQueue) -> bool:
        """After ``max_reconsume_times`` local attempts the batch goes to the DLQ; True when it went."""
        if self._max_reconsume_times < 0 or self._hooks.broadcasting:
            return False
        if not all(m.reconsume_times >= self._max_reconsume_times for m in batch):
            return False
        for msg in batch:
            if not await self._hooks.send_back(msg, DLQ_LEVEL, mq):
                return False
        return True
