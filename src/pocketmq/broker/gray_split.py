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
is the one in the first gray member's id (sorted), else the group's ``gray.queue.ratio``, else 0.1.

``GraySplit`` and ``QueueShare`` are pure; ``GraySplits`` reads the live members from the sources the front
ends register (remoting consumers, gRPC sessions) and the group attributes.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from pocketmq.common.gray import (
    DEFAULT_GRAY_QUEUE_RATIO,
    GRAY_RETRY_QUEUE_NUMS,
    gray_queue_count,
    gray_ratio_of,
    is_gray_client,
)
from pocketmq.errors import BadRequestError

GRAY_CLIENTS_ATTRIBUTE = "gray.clients"  # comma-separated shell globs over client ids
GRAY_RATIO_ATTRIBUTE = "gray.queue.ratio"

MemberSource = Callable[[str], Iterable[str]]  # group -> the client ids alive in it (one front end's view)


@dataclass(frozen=True, slots=True)
class GrayRule:
    """A group's operator-set gray settings (its attributes)."""

    patterns: tuple[str, ...] = ()
    ratio: float | None = None

    @classmethod
    def of(cls, attributes: Mapping[str, str]) -> "GrayRule":
        """Parse the attributes; BadRequestError on a bad ratio (the group update is refused)."""
        patterns = tuple(p.strip() for p in attributes.get(GRAY_CLIENTS_ATTRIBUTE, "").split(",") if p.strip())
        raw = attributes.get(GRAY_RATIO_ATTRIBUTE, "").strip()
        ratio = None
        if raw:
            try:
                ratio = float(raw)
            except ValueError:
                ratio = -1.0
            if not 0.0 <= ratio <= 1.0:
                raise BadRequestError(f"group attribute {GRAY_RATIO_ATTRIBUTE}={raw!r} is not a ratio in [0, 1]")
        return cls(patterns, ratio)

    def is_gray(self, client_id: str) -> bool:
        return is_gray_client(client_id) or any(fnmatch.fnmatchcase(client_id, p) for p in self.patterns)


@dataclass(frozen=True, slots=True)
class QueueShare:
    """The queues one client may pop, for any queue count (topics differ)."""

    gray: bool
    split: bool  # False: every queue (no gray client alive, or no normal one)
    ratio: float

    def queue_ids(self, queue_nums: int) -> list[int]:
        if not self.split:
            return list(range(queue_nums))
        first_gray = queue_nums - gray_queue_count(queue_nums, self.ratio)
        return list(range(first_gray, queue_nums)) if self.gray else list(range(first_gray))

    def retry_queue_ids(self, queue_nums: int) -> list[int]:
        """Of a pop retry topic: the last queue is gray once the topic has ``GRAY_RETRY_QUEUE_NUMS`` or more."""
        if not self.split or queue_nums < GRAY_RETRY_QUEUE_NUMS:
            return list(range(queue_nums))
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
    def of(cls, member_ids: Iterable[str], rule: GrayRule) -> "GraySplit":
        ids = sorted(set(member_ids))
        gray = tuple(cid for cid in ids if rule.is_gray(cid))
        normal = tuple(cid for cid in ids if not rule.is_gray(cid))
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

    def add_member_source(self, source: MemberSource) -> None:
        self._sources.append(source)

    def members(self, group: str) -> list[str]:
        return sorted({cid for source in self._sources for cid in source(group)})

    def rule(self, group: str) -> GrayRule:
        config = self._groups.get(group)
        return GrayRule.of(config.attributes) if config is not None else GrayRule()

    def split(self, group: str) -> GraySplit:
        return GraySplit.of(self.members(group), self.rule(group))

    def share(self, group: str, client_id: str) -> QueueShare:
        return self.split(group).share(client_id)

    def __repr__(self) -> str:
        return f"<GraySplits sources={len(self._sources)}>"
