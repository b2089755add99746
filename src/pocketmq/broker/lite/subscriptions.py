"""Who consumes which lite topics: each consumer (client id) of a group subscribes lite topics of one parent
(SyncLiteSubscription), within its group's quota.

The quota counts the distinct lite topics a group subscribes over all its clients and parents (two clients of
one group on one lite topic count once). A client that stops syncing (the official clients re-send their whole
set every 30 s) is dropped after ``expire_ms``, and its lite topics leave the count.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

from pocketmq.common.errors import LiteSubscriptionQuotaExceededError


class SyncAction(enum.Enum):
    """RocketMQ 5's LiteSubscriptionAction."""

    PARTIAL_ADD = "PARTIAL_ADD"  # add these
    PARTIAL_REMOVE = "PARTIAL_REMOVE"  # remove these
    COMPLETE_ADD = "COMPLETE_ADD"  # these are the client's whole set
    COMPLETE_REMOVE = "COMPLETE_REMOVE"  # the client subscribes none any more


@dataclass(slots=True)
class _Client:
    lites: set[str] = field(default_factory=set)
    seen_ms: int = 0


class LiteSubscriptions:
    def __init__(self, quota: int):
        self.quota = quota
        self._clients: dict[tuple[str, str], dict[str, _Client]] = {}  # (group, parent) -> client id -> its set
        self._group_refs: dict[str, Counter[tuple[str, str]]] = {}  # group -> (parent, lite) -> clients on it

    def of(self, group: str, parent: str, client_id: str) -> set[str]:
        client = self._clients.get((group, parent), {}).get(client_id)
        return client.lites if client is not None else set()

    def group_count(self, group: str) -> int:
        """How many distinct lite topics ``group`` subscribes (what its quota bounds)."""
        return len(self._group_refs.get(group, ()))

    def subscribers(self, parent: str, lite_topic: str) -> list[tuple[str, str]]:
        """(group, client id) of every subscriber of a lite topic."""
        return [
            (group, client_id)
            for (group, p), clients in self._clients.items()
            if p == parent
            for client_id, client in clients.items()
            if lite_topic in client.lites
        ]

    def touch(self, group: str, parent: str, client_id: str, now_ms: int) -> None:
        client = self._clients.get((group, parent), {}).get(client_id)
        if client is not None:
            client.seen_ms = now_ms

    def sync(
        self, group: str, parent: str, client_id: str, action: SyncAction, lite_topics: set[str], now_ms: int
    ) -> None:
        """Apply one SyncLiteSubscription; LiteSubscriptionQuotaExceededError (nothing changed) when the group
        would subscribe more than ``quota`` lite topics."""
        clients = self._clients.setdefault((group, parent), {})
        client = clients.setdefault(client_id, _Client())
        client.seen_ms = now_ms
        if action is SyncAction.PARTIAL_ADD:
            wanted = client.lites | lite_topics
        elif action is SyncAction.COMPLETE_ADD:
            wanted = set(lite_topics)
        elif action is SyncAction.PARTIAL_REMOVE:
            wanted = client.lites - lite_topics
        else:
            wanted = set()
        refs = self._group_refs.setdefault(group, Counter())
        added = {lite for lite in wanted - client.lites if refs[(parent, lite)] == 0}
        refs_after = len(refs) + len(added) - self._released(refs, parent, client.lites - wanted)
        if added and refs_after > self.quota:
            raise LiteSubscriptionQuotaExceededError(
                f"group {group!r} would subscribe {refs_after} lite topics, more than its quota of {self.quota}"
            )
        self._set(group, parent, client_id, client, wanted)

    def expire(self, now_ms: int, expire_ms: int) -> int:
        """Drop the clients silent for longer than ``expire_ms``; how many were dropped."""
        dropped = 0
        for (group, parent), clients in list(self._clients.items()):
            for client_id, client in list(clients.items()):
                if now_ms - client.seen_ms > expire_ms:
                    self._set(group, parent, client_id, client, set())
                    dropped += 1
        return dropped

    def forget_lite(self, parent: str, lite_topic: str) -> None:
        """An expired lite topic leaves every subscription (and its groups' counts)."""
        for (group, p), clients in list(self._clients.items()):
            if p != parent:
                continue
            for client_id, client in list(clients.items()):
                if lite_topic in client.lites:
                    self._set(group, parent, client_id, client, client.lites - {lite_topic})

    @staticmethod
    def _released(refs: Counter, parent: str, removed: set[str]) -> int:
        return sum(1 for lite in removed if refs[(parent, lite)] == 1)

    def _set(self, group: str, parent: str, client_id: str, client: _Client, wanted: set[str]) -> None:
        refs = self._group_refs.setdefault(group, Counter())
        for lite in wanted - client.lites:
            refs[(parent, lite)] += 1
        for lite in client.lites - wanted:
            refs[(parent, lite)] -= 1
            if refs[(parent, lite)] <= 0:
                del refs[(parent, lite)]
        client.lites = wanted
        if not wanted:
            clients = self._clients.get((group, parent), {})
            clients.pop(client_id, None)
            if not clients:
                self._clients.pop((group, parent), None)
        if not refs:
            self._group_refs.pop(group, None)
