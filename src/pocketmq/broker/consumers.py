"""Consumers of each group: who is online, what they subscribe to, and telling members when that changes.

``ConsumerTable`` is the pure core: heartbeats, unregisters, closed connections and expiry go in (with
``now_ms``), and the notifications to send come out: when a client joins a group, the group's *other*
members are told (the newcomer rebalances on its own); when one leaves, the remaining members are told.
``ConsumerRegistry`` is the thin shell: it reads the clock, runs the expiry scan, and hands notifications
to the notifiers the front ends install (the remoting one sends NOTIFY_CONSUMER_IDS_CHANGED oneway).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from pocketmq.broker.clients import ClientChannel, ClientTable
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    topic: str
    expression: str = "*"  # tag expression ("a || b") or an SQL92 expression
    expression_type: str = "TAG"
    sub_version: int = 0


@dataclass(slots=True)
class ConsumerGroupInfo:
    """What the group's members last said about how they consume."""

    group: str
    consume_type: str = "CONSUME_PASSIVELY"  # CONSUME_ACTIVELY (pull) | CONSUME_PASSIVELY (push) | CONSUME_POP
    message_model: str = "CLUSTERING"  # CLUSTERING | BROADCASTING
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OnlineConsumer:
    """One live client of a group as admin listings show it, whichever protocol it came over."""

    client_id: str
    address: str
    language: str
    version: int
    last_heartbeat_ms: int
    protocol: str  # "remoting" | "grpc"
    subscriptions: tuple[SubscriptionData, ...] = ()  # a gRPC client's own; remoting ones are the group's


# The live clients of a group that another front end holds (the gRPC sessions).
OnlineSource = Callable[[str], list[OnlineConsumer]]


@dataclass(frozen=True, slots=True)
class Notification:
    """Tell the client on ``connection`` that the member list of ``group`` changed."""

    group: str
    client_id: str
    connection: object


class ConsumerTable:
    """Pure: membership and subscriptions per group; every mutation returns the notifications to send."""

    def __init__(self, expire_ms: int):
        self._expire_ms = expire_ms
        self._clients = ClientTable()
        self._info: dict[str, ConsumerGroupInfo] = {}

    def heartbeat(self, channel: ClientChannel, info: ConsumerGroupInfo) -> list[Notification]:
        joined = self._clients.touch(info.group, channel)
        self._info[info.group] = info
        if not joined:
            return []
        log.info("event=consumer_joined group=%s client=%s", info.group, channel.client_id)
        return self._notify(info.group, exclude=channel.client_id)

    def unregister(self, group: str, client_id: str) -> list[Notification]:
        if not self._clients.remove(group, client_id):
            return []
        log.info("event=consumer_left group=%s client=%s reason=unregister", group, client_id)
        return self._after_leave([group])

    def connection_closed(self, connection: object) -> list[Notification]:
        groups = self._clients.remove_connection(connection)
        if groups:
            log.info("event=consumer_left groups=%s reason=connection_closed", ",".join(groups))
        return self._after_leave(groups)

    def expire(self, now_ms: int) -> list[Notification]:
        groups = self._clients.expire(now_ms, self._expire_ms)
        if groups:
            log.info("event=consumer_left groups=%s reason=expired", ",".join(groups))
        return self._after_leave(groups)

    def routes_changed(self, group: str) -> list[Notification]:
        """The queues the group's members split changed (its retry topic grew): every member is told."""
        return self._notify(group, exclude=None)

    def _after_leave(self, groups: list[str]) -> list[Notification]:
        notifications = []
        for group in groups:
            if not self._clients.clients(group):
                self._info.pop(group, None)
            notifications += self._notify(group, exclude=None)
        return notifications

    def _notify(self, group: str, exclude: str | None) -> list[Notification]:
        return [
            Notification(group, ch.client_id, ch.connection)
            for ch in self._clients.clients(group)
            if ch.client_id != exclude
        ]

    def client_ids(self, group: str) -> list[str]:
        return self._clients.client_ids(group)

    def clients(self, group: str) -> list[ClientChannel]:
        return self._clients.clients(group)

    def group_info(self, group: str) -> ConsumerGroupInfo | None:
        return self._info.get(group)

    def find(self, group: str, client_id: str) -> ClientChannel | None:
        return self._clients.find(group, client_id)

    def groups(self) -> list[str]:
        return self._clients.groups()

    def groups_subscribing(self, topic: str) -> list[str]:
        return sorted(g for g, info in self._info.items() if topic in info.subscriptions)

    def __repr__(self) -> str:
        return f"<ConsumerTable groups={len(self._info)} clients={len(self._clients)}>"


Notifier = Callable[[Notification], None]


class ConsumerRegistry:
    """The broker's consumer registry: a ConsumerTable driven by the clock, with pluggable notifiers."""

    def __init__(self, expire_ms: int, *, clock: Clock = SYSTEM_CLOCK):
        self.table = ConsumerTable(expire_ms)
        self._clock = clock
        self._notifiers: list[Notifier] = []
        self._online_sources: list[OnlineSource] = []

    def add_online_source(self, source: OnlineSource) -> None:
        """Clients another front end holds show in ``online`` (they do not take part in remoting rebalances)."""
        self._online_sources.append(source)

    def online(self, group: str) -> list[OnlineConsumer]:
        """Every live client of ``group``: remoting heartbeats first, then the other front ends', by client id."""
        remoting = [
            OnlineConsumer(ch.client_id, ch.remote_address, ch.language, ch.version, ch.last_heartbeat_ms, "remoting")
            for ch in self.table.clients(group)
        ]
        others = [c for source in self._online_sources for c in source(group)]
        return sorted(remoting, key=lambda c: c.client_id) + sorted(others, key=lambda c: c.client_id)

    def add_notifier(self, notifier: Notifier) -> None:
        """``notifier(n)`` is called for every notification; it ignores connections it does not own."""
        self._notifiers.append(notifier)

    def heartbeat(
        self,
        group: str,
        client_id: str,
        connection: object,
        *,
        info: ConsumerGroupInfo | None = None,
        language: str = "JAVA",
        version: int = 0,
        remote_address: str = "",
    ) -> None:
        channel = ClientChannel(client_id, connection, self._clock.now_ms(), language, version, remote_address)
        self._dispatch(self.table.heartbeat(channel, info or ConsumerGroupInfo(group)))

    def unregister(self, group: str, client_id: str) -> None:
        self._dispatch(self.table.unregister(group, client_id))

    def connection_closed(self, connection: object) -> None:
        self._dispatch(self.table.connection_closed(connection))

    def expire(self) -> None:
        self._dispatch(self.table.expire(self._clock.now_ms()))

    def client_ids(self, group: str) -> list[str]:
        return self.table.client_ids(group)

    def notify_group(self, group: str) -> None:
        """Tell every member of ``group`` to rebalance (its queues changed)."""
        self._dispatch(self.table.routes_changed(group))

    def subscribers(self, group: str) -> dict[str, tuple[str, ...]]:
        """Client id -> the topics the group subscribes (remoting heartbeats carry them per group)."""
        info = self.table.group_info(group)
        topics = tuple(sorted(info.subscriptions)) if info is not None else ()
        return {cid: topics for cid in self.table.client_ids(group)}

    def client_id_on(self, group: str, connection: object) -> str:
        """The id the client on ``connection`` heart-beat with in ``group`` ("" when it did not)."""
        return next((ch.client_id for ch in self.table.clients(group) if ch.connection is connection), "")

    def _dispatch(self, notifications: list[Notification]) -> None:
        for notification in notifications:
            for notifier in self._notifiers:
                try:
                    notifier(notification)
                except Exception as exc:  # a dead peer must not stop the others being told
                    log.warning(
                        "event=notify_failed group=%s client=%s error=%s",
                        notification.group,
                        notification.client_id,
                        exc,
                    )

    def __repr__(self) -> str:
        return f"<ConsumerRegistry {self.table!r}>"
