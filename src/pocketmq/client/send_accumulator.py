"""Auto-batching of concurrent sends (``ProducerOptions.auto_batch``): RocketMQ 5's ``autoBatch`` producer.

The plain sends of one topic that start in one turn of the event loop with the same retry count (``send``'s, or
``send_async``'s) are held until the end of that turn and go to the broker as one SEND_BATCH_MESSAGE, with that
many retries; each send still gets a SendResult of its own (its offset is the batch's first offset plus its
place in the batch). A lone send waits for nothing but the end of the loop turn it started in; a batch leaves
early when it reaches ``max_messages`` or ``max_bytes``.

Why: the broker stores a batch for less than half the CPU per message of single sends, and the client encodes
and awaits one request instead of dozens (docs/benchmarks.md). RocketMQ holds batches for up to
``batchMaxDelayMs`` (10 ms); a loop turn is enough here, since concurrent sends start in the same turns.

Which sends are plain is the producer's call (``AsyncProducer._batchable``): not delayed, not in a message group,
not gray, not idempotent, under the compression threshold, through the default selector. A batch that fails after
its retries fails as a whole (every send of it gets the error); one the broker refuses as a whole is sent again
message by message by the producer, so a bad message fails only its own send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pocketmq.common.message import Message

# Sends messages of one topic as one batch with a number of retries; the outcome of each message, in order (a
# result, or the exception that failed it alone).
SendBatch = Callable[[list[Message], int], Awaitable[list]]

# What a batch shares: its topic and its retry count.
_BatchKey = tuple[str, int]


@dataclass(slots=True)
class _Pending:
    """The sends of one batch waiting for the end of the loop turn."""

    messages: list[Message] = field(default_factory=list)
    futures: list[asyncio.Future] = field(default_factory=list)
    body_bytes: int = 0


class SendAccumulator:
    """Per topic and retry count, the sends of this loop turn; ``send_batch`` sends a list of them as one batch
    and gives each message's result."""

    def __init__(self, send_batch: SendBatch, *, max_messages: int, max_bytes: int):
        self._send_batch = send_batch
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self._pending: dict[_BatchKey, _Pending] = {}
        self._tasks: set[asyncio.Task] = set()

    def add(self, message: Message, retry_times: int) -> asyncio.Future:
        """Queue ``message`` (checked already) for a batch sent with ``retry_times`` retries; the future resolves
        to its own result."""
        loop = asyncio.get_running_loop()
        key = (message.topic, retry_times)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _Pending()
            loop.call_soon(self._flush, key, pending)
        future = loop.create_future()
        pending.messages.append(message)
        pending.futures.append(future)
        pending.body_bytes += len(message.body)
        if len(pending.messages) >= self._max_messages or pending.body_bytes >= self._max_bytes:
            self._flush(key, pending)
        return future

    def _flush(self, key: _BatchKey, pending: _Pending) -> None:
        if self._pending.get(key) is not pending:
            return  # left early when it filled up; this is the end-of-turn call of that batch
        del self._pending[key]
        task = asyncio.get_running_loop().create_task(self._send(pending, retry_times=key[1]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, pending: _Pending, *, retry_times: int) -> None:
        # a sender cancelled before its batch left takes its message back
        kept = [
            (message, future) for message, future in zip(pending.messages, pending.futures) if not future.cancelled()
        ]
        if not kept:
            return
        futures = [future for _, future in kept]
        try:
            outcomes = await self._send_batch([message for message, _ in kept], retry_times)
        except asyncio.CancelledError:
            for future in futures:
                future.cancel()
            raise
        except Exception as exc:
            outcomes = [exc] * len(futures)
        for future, outcome in zip(futures, outcomes):
            if future.done():  # its sender was cancelled meanwhile
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    async def close(self) -> None:
        """Send what is pending and wait for the batches in flight (their senders get their results)."""
        for key, pending in list(self._pending.items()):
            self._flush(key, pending)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
