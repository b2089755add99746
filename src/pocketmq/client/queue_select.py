"""Which queue a message goes to: pure functions of the topic's writable queues and the message.

- **Round robin** over the writable queues of every broker in the route. Queues are interleaved by broker
  (``a/0, b/0, a/1, b/1 ...``) so that consecutive sends alternate brokers. A retry avoids the brokers that
  already failed for this message (RocketMQ's ``selectOneMessageQueue(lastBrokerName)``), falling back to any
  queue when every broker failed.
- **Message group** (``__SHARDINGKEY``): the queue at ``java_string_hash(group) mod len(queues)``, the
  placement RocketMQ's ``SelectMessageQueueByHash`` gives, so the same group lands on the same queue in every
  process (Python's ``hash()`` is salted per process and is never used). A retry of a group message stays on
  that queue, as RocketMQ 5 clients do for FIFO messages: moving it would break the group's order.

- **Gray** (``GraySelector``, docs/gray.md): gray messages to gray queues, the others to normal queues.
- **Retry topics** (``RetryTopicSelector``): a ``%RETRY%`` topic's fixed split, the broker's own for the retries
  it writes: gray messages to each broker's last queue, the others to the rest.

Also: ``KeyHashSelector`` (hash of a message key, RocketMQ's SelectMessageQueueByHash), ``RandomSelector``,
and ``FunctionSelector`` (a user-defined function).

Selectors take the failed brokers as input so that the retries issue can add latency-based fault avoidance
as one more set of brokers to avoid.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

from pocketmq.client.rebalance import gray_queues, gray_retry_queues
from pocketmq.common.errors import ClientError
from pocketmq.common.gray import is_gray_message
from pocketmq.common.message import Message, MessageQueue


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def interleave_by_broker(queues: Iterable[MessageQueue]) -> list[MessageQueue]:
    """``a/0, b/0, a/1, b/1, a/2 ...``: brokers sorted by name, queue ids ascending within each broker."""
    by_broker: dict[str, list[MessageQueue]] = {}
    for mq in sorted(queues):
        by_broker.setdefault(mq.broker_name, []).append(mq)
    columns = [by_broker[name] for name in sorted(by_broker)]
    return [mq for row in itertools.zip_longest(*columns) for mq in row if mq is not None]


class QueueSelector(Protocol):
    def select(self, queues: Sequence[MessageQueue], message: Message, avoid_brokers: frozenset[str]) -> MessageQueue:
        """One of ``queues`` (non-empty) for ``message``; prefer queues not on ``avoid_brokers``."""


class RoundRobinSelector:
    """Round robin over the queues, skipping brokers to avoid. Safe to share between tasks and threads."""

    def __init__(self, start: int | None = None):
        self._counter = itertools.count(random.randrange(1 << 16) if start is None else start)

    def select(
        self, queues: Sequence[MessageQueue], message: Message, avoid_brokers: frozenset[str] = frozenset()
    ) -> MessageQueue:
        if not queues:
            raise ValueError("no queue to select from")
        index = next(self._counter)
        if avoid_brokers:
            for step in range(len(queues)):
                mq = queues[(index + step) % len(queues)]
                if mq.broker_name not in avoid_brokers:
                    return mq
        return queues[index % len(queues)]


class MessageGroupSelector:
    """The queue of the message's group (or lite topic: all of a lite topic's messages go to one broker);
    messages without either fall back to round robin."""

    def __init__(self, fallback: QueueSelector | None = None):
        self._fallback = fallback or RoundRobinSelector()

    def select(
        self, queues: Sequence[MessageQueue], message: Message, avoid_brokers: frozenset[str] = frozenset()
    ) -> MessageQueue:
        group = message.message_group or message.lite_topic
        if group is None:
            return self._fallback.select(queues, message, avoid_brokers)
        if not queues:
            raise ValueError("no queue to select from")
        return queues[abs(java_string_hash(group)) % len(queues)]


class KeyHashSelector:
    """RocketMQ's SelectMessageQueueByHash: the queue at ``java_string_hash(key) mod len(queues)``, the key being
    ``key_of(message)`` (default: the message's first key). Messages without a key fall back to round robin."""

    def __init__(self, key_of: Callable[[Message], str | None] | None = None, fallback: QueueSelector | None = None):
        self._key_of = key_of or (lambda m: m.keys[0] if m.keys else None)
        self._fallback = fallback or RoundRobinSelector()

    def select(
        self, queues: Sequence[MessageQueue], message: Message, avoid_brokers: frozenset[str] = frozenset()
    ) -> MessageQueue:
        key = self._key_of(message)
        if key is None:
            return self._fallback.select(queues, message, avoid_brokers)
        if not queues:
            raise ValueError("no queue to select from")
        return queues[abs(java_string_hash(key)) % len(queues)]


class RandomSelector:
    """RocketMQ's SelectMessageQueueByRandom, preferring brokers not to avoid; seedable for tests."""

    def __init__(self, rng: random.Random | None = None):
        self._rng = rng or random.Random()

    def select(
        self, queues: Sequence[MessageQueue], message: Message, avoid_brokers: frozenset[str] = frozenset()
    ) -> MessageQueue:
        if not queues:
            raise ValueError("no queue to select from")
        preferred = [q for q in queues if q.broker_name not in avoid_brokers] or list(queues)
        return preferred[self._rng.randrange(len(preferred))]


class FunctionSelector:
    """A user-defined selector from a plain function ``fn(queues, message) -> MessageQueue``."""

    def __init__(self, fn: Callable[[Sequence[MessageQueue], Message], MessageQueue]):
        self._fn = fn

    def select(
        self, queues: Sequence[MessageQueue], message: Message, avoid_brokers: frozenset[str] = frozenset()
    ) -> MessageQueue:
        chosen = self._fn(queues, message)
        if chosen not in queues:
            raise ValueError(f"selector returned {chosen}, which is not one of the topic's writable queues")
        return chosen


class GraySelector:
    """RIP-72's SelectMessageQueueByGray: a gray message (property ``PMQ_GRAY``, common/gray.py) goes to a gray
    queue, any other to a normal one; ``inner`` (round robin by default) picks within that part. Gray queues
    are, per broker, the last ceil(n * r) queues, r being the topic's own ratio on that broker when the route
    carries one (``topic_ratios``: ``for_route``), else ``ratio``. When ``ratio`` leaves no queue of the kind a
    message needs (ratio 1: no normal queue, 0: no gray one), the send raises ClientError saying so; when the
    topic's own ratio does (0 ends a rollout), the message may go to any queue, as the broker places it."""

    def __init__(
        self,
        ratio: float = 0.1,
        inner: QueueSelector | None = None,
        topic_ratios: Mapping[str, float] = MappingProxyType({}),
    ):
        if not 0.0 <= ratio <= 1.0:
            raise ClientError(f"gray queue ratio {ratio} is outside [0, 1]")
        self.ratio = ratio
        self.inner = inner or RoundRobinSelector()
        self.topic_ratios = topic_ratios

    def for_route(self, topic_ratios: Mapping[str, float]) -> GraySelector:
        """This selector (same ``inner``, so its round robin goes on) splitting by the topic's ratios."""
        return self if topic_ratios == self.topic_ratios else GraySelector(self.ratio, self.inner, topic_ratios)

    def select(
        self, queues: Sequence[MessageQueue], message: Message, avoid_brokers: frozenset[str] = frozenset()
    ) -> MessageQueue:
        gray = is_gray_message(message.properties)
        gray_set = gray_queues(list(queues), self.ratio, self.topic_ratios)
        part = [q for q in queues if (q in gray_set) == gray]
        if not part and self.topic_ratios:
            part = list(queues)
        if not part:
            kind = "gray" if gray else "normal"
            raise ClientError(
                f"no {kind} queues: topic {message.topic!r} has {len(queues)} writable queues and "
                f"gray queue ratio {self.ratio} leaves none {kind}"
            )
        return self.inner.select(part, message, avoid_brokers)


class RetryTopicSelector:
    """A ``%RETRY%`` topic's split (common/gray.py): where a broker has 2 queues or more, its last one takes the
    gray messages and the others every other message, as the broker places the retries it writes itself, so a
    message sent there by a client (``pocketmq dlq resend``, the console's resend) reaches only the consumers
    of its kind. ``inner`` picks within the part; with no queue of the part (no broker split), any queue."""

    def __init__(self, inner: QueueSelector | None = None):
        self.inner = inner or RoundRobinSelector()

    def select(
        self, queues: Sequence[MessageQueue], message: Message, avoid_brokers: frozenset[str] = frozenset()
    ) -> MessageQueue:
        gray = is_gray_message(message.properties)
        gray_set = gray_retry_queues(list(queues))
        part = [q for q in queues if (q in gray_set) == gray]
        return self.inner.select(part or queues, message, avoid_brokers)
