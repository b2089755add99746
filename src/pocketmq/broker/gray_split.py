"""Server-side gray split for POP consumers (docs/gray.md): which queues each client of a group may pop.

POP consumers share queues instead of owning them, so the broker decides: while a group has both gray and
normal clients alive, gray clients pop only the gray queues of a topic (on this broker: the last
``ceil(n * ratio)``, as ``common.gray.gray_queue_count`` says) and normal clients only the others; the pop
retry topic ``%RETRY%<group>_<topic>`` is split the same way as the push retry topic (its last queue holds
the retries of gray messages: broker/gray.py). With no gray client alive every client gets every queue at
once (fallback), and with only gray clients alive they do too (nothing stalls); the split comes back as soon
as both kinds are alive again. QueryAssignment, ReceiveMessage and POP_MESSAGE all ask ``GraySplits``.

A client is gray when its id carries ``@gray`` (RIP-72's ``@gray[<ratio>]`` too) or matches one of its
group's ``gray.clients`` patterns (shell globs over client ids, a group attribute an operator sets so that
unmodified official clients, whose ids are ``hostname@pid@index@time``, can be gray: ``canary-*``). The ratio
is the one in the first gray member's id (sorted), else the group's ``gray.queue.ratio``, else 0.1; but a
topic with a ratio of its own (topic attribute ``gray.queue.ratio``) is split by that one, the ratio the broker
places official producers' sends by (common.gray.placement_queues), so placement and pops agree.

``GraySplit`` and ``QueueShare`` are pure; ``GraySplits`` reads the live members from the sources the front
ends register (remoting consumers, gRPC sessions) and the group attributes. For ``pocketmq group describe``
it also keeps the queues push consumers say they hold (their heartbeats carry ``pmqHeldQueues``: they
rebalance on their own) and answers, per live member, whether it is gray and which queues of this broker it
holds (push) or may pop (the server-side share of every topic it subscribes and of its pop retry topic).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pocketmq.common.errors import BadRequestError
from pocketmq.common.gray import (
    DEFAULT_GRAY_QUEUE_RATIO,
    GRAY_RATIO_ATTRIBUTE,
    GRAY_RETRY_QUEUE_NUMS,
    gray_queue_count,
    gray_ratio_of,
    is_gray_client,
    parse_gray_ratio,
)
from pocketmq.common.topic import RETRY_GROUP_TOPIC_PREFIX, TopicConfig, pop_retry_topic

GRAY_CLIENTS_ATTRIBUTE = "gray.clients"  # comma-separated shell globs over client ids

# group -> {client id: the topics it subscribes} of the clients alive in it (one front end's view)
MemberSource = Callable[[str], Mapping[str, Iterable[str]]]


@dataclass(frozen=True, slots=True)
class GrayRule:
    """A group's operator-set gray settings (its attributes)."""

    patterns: tuple[str, ...] = ()
    ratio: float | None = None

    @classmethod
    def of(cls, attributes: Mapping[str, str]) -> GrayRule:
        """Parse the attributes; BadRequestError on a bad ratio (the group update is refused)."""
        patterns = tuple(p.strip() for p in attributes.get(GRAY_CLIENTS_ATTRIBUTE, "").split(",") if p.strip())
        raw = attributes.get(GRAY_RATIO_ATTRIBUTE, "").strip()
        try:
            ratio = parse_gray_ratio(raw) if raw else None
        except ValueError as exc:
            raise BadRequestError(f"group attribute {exc}") from None
        return cls(patterns, ratio)

    def is_gray(self, client_id: str) -> bool:
        return is_gray_client(client_id) or any(fnmatch.fnmatchcase(client_id, p) for p in self.patterns)


@dataclass(frozen=True, slots=True)
class QueueShare:
    """The queues one client may pop, for any queue count (topics differ)."""

    gray: bool
    split: bool  # False: every queue (no gray client alive, or no normal one)
    ratio: float

    def queue_ids(self, queue_nums: int, topic_ratio: float | None = None) -> list[int]:
        """``topic_ratio``: the topic's own ``gray.queue.ratio``, which wins over the group's: the broker places
        messages sent without a queue by it (common.gray.placement_queues), so pops must agree."""
        if not self.split:
            return list(range(queue_nums))
        ratio = self.ratio if topic_ratio is None else topic_ratio
        first_gray = queue_nums - gray_queue_count(queue_nums, ratio)
        return list(range(first_gray, queue_nums)) if self.gray else list(range(first_gray))

    def retry_queue_ids(self, queue_nums: int) -> list[int]:
        """Of a pop retry topic: the last queue is gray once the topic has ``GRAY_RETRY_QUEUE_NUMS`` or more.
        A topic with fewer holds only normal retries (revive grows it before it places the first gray one:
        broker/gray.py ``place_retry_copy``), so while the split is on, a gray client reads none of it: a normal
        retry revived before the topic grows must not reach a gray client."""
        if not self.split:
            return list(range(queue_nums))
        if queue_nums < GRAY_RETRY_QUEUE_NUMS:
            return [] if self.gray else list(range(queue_nums))
        return [queue_nums - 1] if self.gray else list(range(queue_nums - 1))


EVERY_QUEUE = QueueShare(gray=False, split=False, ratio=DEFAULT_GRAY_QUEUE_RATIO)


@dataclass(frozen=True, slots=True)
class GraySplit:
    """One group's split, from its live members and its rule."""

    gray_ids: tuple[str, ...]
    normal_ids: tuple[str, ...]
    ratio: float
    rule: GrayRule

    @classmethod
    def of(cls, member_ids: Iterable[str], rule: GrayRule) -> GraySplit:
        ids = sorted(set(member_ids))
        flags = [rule.is_gray(cid) for cid in ids]  # once per member: the patterns are globs
        gray = tuple(cid for cid, is_gray in zip(ids, flags) if is_gray)
        normal = tuple(cid for cid, is_gray in zip(ids, flags) if not is_gray)
        ratio = next((r for r in map(gray_ratio_of, gray) if r is not None), None)
        if ratio is None:
            ratio = rule.ratio if rule.ratio is not None else DEFAULT_GRAY_QUEUE_RATIO
        return cls(gray, normal, ratio, rule)

    @property
    def active(self) -> bool:
        return bool(self.gray_ids) and bool(self.normal_ids)

    def share(self, client_id: str) -> QueueShare:
        """What ``client_id`` may pop; a client the members do not list yet counts as alive."""
        gray = self.rule.is_gray(client_id)
        split = bool(self.gray_ids or gray) and bool(self.normal_ids or not gray)
        return QueueShare(gray, split, self.ratio)


class GraySplits:
    """The broker's view: live members per group from every registered source, and the group attributes."""

    def __init__(self, groups) -> None:
        self._groups = groups
        self._sources: list[MemberSource] = []
        self._held: dict[tuple[str, str], tuple[tuple[str, int], ...]] = {}  # (group, client id) -> queues

    def add_member_source(self, source: MemberSource) -> None:
        self._sources.append(source)

    def subscriptions(self, group: str) -> dict[str, set[str]]:
        """Live client id -> the topics it subscribes, over every front end."""
        members: dict[str, set[str]] = {}
        for source in self._sources:
            for cid, topics in source(group).items():
                members.setdefault(cid, set()).update(topics)
        return members

    def members(self, group: str) -> set[str]:
        """Live client ids over every front end (what each pop's split needs: not their topics)."""
        return {cid for source in self._sources for cid in source(group)}

    def record_held(self, group: str, client_id: str, queues: Iterable[tuple[str, int]] | None) -> None:
        """What a push consumer says it holds on this broker (None: it does not say); bounded by the live
        members: entries of clients that left are dropped here."""
        if queues is None:
            self._held.pop((group, client_id), None)
        else:
            self._held[(group, client_id)] = tuple(sorted(queues))
        live = self.members(group) | {client_id}
        for key in [k for k in self._held if k[0] == group and k[1] not in live]:
            del self._held[key]

    def describe(self, group: str, topic_config: Callable[[str], TopicConfig | None]) -> list[dict]:
        """Per live member: ``clientId``, ``gray``, ``assignedBy`` (``client``: the queues a push consumer
        reported; ``broker``: its POP share) and ``queues`` (``[topic, queue id]`` pairs of this broker).
        ``topic_config(topic)`` is the topic's config here (None when the topic is not here)."""
        split = self.split(group)
        rows = []
        for cid, topics in sorted(self.subscriptions(group).items()):
            held = self._held.get((group, cid))
            if held is not None:
                queues = [list(q) for q in held]
            else:
                queues = share_queues(split.share(cid), group, topics, topic_config)
            rows.append(
                {
                    "clientId": cid,
                    "gray": split.rule.is_gray(cid),
                    "assignedBy": "client" if held is not None else "broker",
                    "queues": queues,
                }
            )
        return rows

    def rule(self, group: str) -> GrayRule:
        config = self._groups.get(group)
        return GrayRule.of(config.attributes) if config is not None else GrayRule()

    def split(self, group: str) -> GraySplit:
        return GraySplit.of(self.members(group), self.rule(group))

    def share(self, group: str, client_id: str) -> QueueShare:
        return self.split(group).share(client_id)

    def __repr__(self) -> str:
        return f"<GraySplits sources={len(self._sources)}>"


def share_queues(
    share: QueueShare, group: str, topics: Iterable[str], topic_config: Callable[[str], TopicConfig | None]
) -> list[list]:
    """``[topic, queue id]`` pairs a POP client may pop: its share of each topic and of its pop retry topic."""
    queues: list[list] = []
    for topic in sorted(t for t in topics if not t.startswith(RETRY_GROUP_TOPIC_PREFIX)):
        config = topic_config(topic)
        if config is not None:
            queues += [[topic, q] for q in share.queue_ids(config.read_queue_nums, config.gray_queue_ratio)]
        retry_config = topic_config(pop_retry_topic(group, topic))
        if retry_config is not None:
            queues += [[retry_config.name, q] for q in share.retry_queue_ids(retry_config.read_queue_nums)]
    return queues


def held_queues(consumer_data: Mapping, broker_name: str) -> list[tuple[str, int]] | None:
    """The queues of ``broker_name`` in a heartbeat's consumer data ``pmqHeldQueues`` (PocketMQ's; None when
    absent, as from RocketMQ clients); entries that are not ``{topic, brokerName, queueId}`` are skipped."""
    entries = consumer_data.get("pmqHeldQueues")
    if not isinstance(entries, list):
        return None
    held = []
    for entry in entries:
        try:
            if entry["brokerName"] == broker_name:
                held.append((str(entry["topic"]), int(entry["queueId"])))
        except (KeyError, TypeError, ValueError):
            continue
    return held
