"""Client-side rebalancing: which consumer of a group takes which queues. Pure functions of (queues, ids).

Every consumer of a group computes the same assignment from the same inputs (the topic's queues from the
route, the group's consumer ids from GET_CONSUMER_LIST_BY_GROUP) and keeps its own share, so no coordinator
is needed. Both inputs are sorted first, so the order a broker lists them in does not matter.

Strategies (RocketMQ's names):

- ``allocate_averagely`` (default): contiguous blocks, sizes differing by at most one, the first
  ``len(queues) % len(ids)`` consumers taking one more.
- ``allocate_averagely_by_circle``: queue i goes to consumer i mod n.
- ``ConsistentHashAllocator``: each consumer owns ``virtual_nodes`` points on a hash ring; a queue goes to
  the first point at or after its hash. A consumer joining or leaving moves only the queues it takes or gave.
- ``GrayAllocator`` (RocketMQ's RIP-72): wraps any strategy. Gray queues are, per broker, the last
  ``ceil(n * ratio)`` queues of the broker's sorted queues (the ratio: the topic's own where the route carries
  one, else the consumer's setting); while any gray consumer (client id containing
  ``@gray``) is in the group, gray consumers share the gray queues and normal consumers the rest; with none,
  the wrapped strategy's plain result, so normal consumers take the gray queues over at once.

A user-defined strategy is any callable ``(queues, consumer_ids) -> {consumer_id: [queues]}``.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from pocketmq.common.gray import gray_queue_count, is_gray_client
from pocketmq.common.message import MessageQueue

Assignment = dict[str, list[MessageQueue]]
AllocateStrategy = Callable[[list[MessageQueue], list[str]], Assignment]


def _sorted_queues(queues) -> list[MessageQueue]:
    return sorted(set(queues), key=lambda q: (q.topic, q.broker_name, q.queue_id))


def allocate_averagely(queues: list[MessageQueue], consumer_ids: list[str]) -> Assignment:
    mqs, ids = _sorted_queues(queues), sorted(set(consumer_ids))
    result: Assignment = {cid: [] for cid in ids}
    if not ids:
        return result
    base, extra = divmod(len(mqs), len(ids))
    start = 0
    for index, cid in enumerate(ids):
        size = base + (1 if index < extra else 0)
        result[cid] = mqs[start : start + size]
        start += size
    return result


def allocate_averagely_by_circle(queues: list[MessageQueue], consumer_ids: list[str]) -> Assignment:
    mqs, ids = _sorted_queues(queues), sorted(set(consumer_ids))
    result: Assignment = {cid: [] for cid in ids}
    for index, mq in enumerate(mqs):
        if ids:
            result[ids[index % len(ids)]].append(mq)
    return result


def _ring_hash(text: str) -> int:
    return int.from_bytes(hashlib.md5(text.encode()).digest()[:8], "big")


@dataclass(frozen=True)
class ConsistentHashAllocator:
    virtual_nodes: int = 10

    def __call__(self, queues: list[MessageQueue], consumer_ids: list[str]) -> Assignment:
        ids = sorted(set(consumer_ids))
        result: Assignment = {cid: [] for cid in ids}
        if not ids:
            return result
        ring = sorted((_ring_hash(f"{cid}-{n}"), cid) for cid in ids for n in range(self.virtual_nodes))
        points = [p for p, _ in ring]
        for mq in _sorted_queues(queues):
            index = bisect.bisect_left(points, _ring_hash(str(mq))) % len(ring)
            result[ring[index][1]].append(mq)
        return result


def gray_queues(
    queues: list[MessageQueue], ratio: float, topic_ratios: Mapping[str, float] = MappingProxyType({})
) -> set[MessageQueue]:
    """Per broker (and topic), the last ceil(n * r) of its sorted queues: r is the topic's own ratio on that
    broker (``topic_ratios``, by broker name, from the route) when it has one, else ``ratio``."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"gray queue ratio {ratio} is outside [0, 1]")  # even for an empty topic
    by_broker: dict[tuple[str, str], list[MessageQueue]] = defaultdict(list)
    for mq in _sorted_queues(queues):
        by_broker[(mq.topic, mq.broker_name)].append(mq)
    result: set[MessageQueue] = set()
    for (_, broker_name), mqs in by_broker.items():
        count = gray_queue_count(len(mqs), topic_ratios.get(broker_name, ratio))
        result.update(mqs[len(mqs) - count :] if count else ())
    return result


def gray_retry_queues(queues: list[MessageQueue]) -> set[MessageQueue]:
    """Of a ``%RETRY%`` topic, per broker, the last queue when the broker has 2 or more (common/gray.py)."""
    by_broker: dict[tuple[str, str], list[MessageQueue]] = defaultdict(list)
    for mq in _sorted_queues(queues):
        by_broker[(mq.topic, mq.broker_name)].append(mq)
    return {mqs[-1] for mqs in by_broker.values() if len(mqs) >= 2}


@dataclass(frozen=True)
class GrayAllocator:
    """``retry_split``: split by ``gray_retry_queues`` (a retry topic) instead of ``gray_queues``.
    ``topic_ratios``: the topic's own ratio by broker name (the route's), which wins over ``ratio``."""

    inner: AllocateStrategy = allocate_averagely
    ratio: float = 0.1
    retry_split: bool = False
    topic_ratios: Mapping[str, float] = field(default_factory=dict, hash=False)

    def __call__(self, queues: list[MessageQueue], consumer_ids: list[str]) -> Assignment:
        gray_ids = [cid for cid in consumer_ids if is_gray_client(cid)]
        if not gray_ids:
            return self.inner(queues, consumer_ids)
        gray = gray_retry_queues(queues) if self.retry_split else gray_queues(queues, self.ratio, self.topic_ratios)
        normal_ids = [cid for cid in consumer_ids if not is_gray_client(cid)]
        result = self.inner([q for q in queues if q in gray], gray_ids)
        if normal_ids:
            result.update(self.inner([q for q in queues if q not in gray], normal_ids))
        else:  # only gray consumers are left: they must take the normal queues too, or those would stall
            for cid, mqs in self.inner([q for q in queues if q not in gray], gray_ids).items():
                result[cid] = result.get(cid, []) + mqs
        return result
