"""Sessions of gRPC v2 clients, keyed by the ``x-mq-client-id`` header.

A session holds what a client told us (its kind, group and topics), when it last sent a heartbeat, and the
outbox of its Telemetry stream: the one way the server can push a command to a client (a transaction check,
later). A client that stops sending heartbeats is expired after ``heartbeat_timeout_ms``; a client that says
goodbye (NotifyClientTermination) is dropped at once. Either way its stream is closed.

The registry is plain state driven by ``now_ms`` (no clock, no task inside); the gRPC server runs the loop
that calls ``expire``. It lives on the event loop thread and needs no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pocketmq.broker.consumers import OnlineConsumer, SubscriptionData
from pocketmq.protocol.grpc_codec import ClientSettings

log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_TIMEOUT_MS = 120_000  # the Apache proxy's
DEFAULT_OUTBOX_CAPACITY = 64


class Outbox:
    """The bounded queue of commands waiting to be written on one Telemetry stream.

    ``offer`` never blocks: when the client reads too slowly the command is refused (and the caller retries
    later, as transaction checks do). ``get`` returns None once the outbox is closed and drained.
    """

    def __init__(self, capacity: int = DEFAULT_OUTBOX_CAPACITY):
        if capacity <= 0:
            raise ValueError("outbox capacity must be positive")
        self._capacity = capacity
        self._items: deque[Any] = deque()
        self._ready = asyncio.Event()
        self.closed = False
        self.said_goodbye = False  # closed because the client ended its session (NotifyClientTermination)

    def offer(self, command: Any) -> bool:
        if self.closed or len(self._items) >= self._capacity:
            return False
        self._items.append(command)
        self._ready.set()
        return True

    @property
    def has_room(self) -> bool:
        return not self.closed and len(self._items) < self._capacity

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def get(self) -> Any | None:
        while not self._items:
            if self.closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"<Outbox {len(self._items)}/{self._capacity}{' closed' if self.closed else ''}>"


@dataclass
class Session:
    """One client, as this broker knows it."""

    client_id: str
    last_heartbeat_ms: int
    client_type: str = "CLIENT_TYPE_UNSPECIFIED"
    group: str | None = None
    topics: tuple[str, ...] = ()
    language: str = ""
    address: str = ""  # host:port the client connects from
    filters: tuple[tuple[str, str, str], ...] = ()  # a consumer's (topic, TAG|SQL, expression)
    outbox: Outbox | None = field(default=None, repr=False)
    # done when the session ends; made by the first receive, on the event loop (``SessionRegistry.receiving``)
    ended: asyncio.Future | None = field(default=None, repr=False)
    open_receives: set[asyncio.Future] = field(default_factory=set, repr=False)  # each done when its call ends

    async def receives_closed(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the receives open when the session ended have answered."""
        if self.open_receives:
            await asyncio.wait(list(self.open_receives), timeout=timeout_s)

    def push(self, command: Any) -> bool:
        """Queue ``command`` for the client's Telemetry stream; False when it has none or it is full."""
        return self.outbox is not None and self.outbox.offer(command)


class SessionRegistry:
    """Sessions by client id, with heartbeat expiry."""

    def __init__(
        self, heartbeat_timeout_ms: int = DEFAULT_HEARTBEAT_TIMEOUT_MS, outbox_capacity: int = DEFAULT_OUTBOX_CAPACITY
    ):
        if heartbeat_timeout_ms <= 0:
            raise ValueError("heartbeat timeout must be positive")
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self._outbox_capacity = outbox_capacity
        self._sessions: dict[str, Session] = {}
        # group -> its sessions by client id: the gray split asks for a group's consumers on every pop
        self._by_group: dict[str, dict[str, Session]] = {}

    def heartbeat(
        self,
        client_id: str,
        now_ms: int,
        *,
        client_type: str | None = None,
        group: str | None = None,
        language: str | None = None,
    ) -> Session:
        """Create or refresh the session of ``client_id``; fields given update it."""
        session = self._sessions.get(client_id)
        if session is None:
            session = self._sessions[client_id] = Session(client_id, now_ms)
            log.info("event=grpc_client_registered client_id=%s client_type=%s", client_id, client_type)
        session.last_heartbeat_ms = max(session.last_heartbeat_ms, now_ms)
        if client_type is not None:
            session.client_type = client_type
        if group is not None and group != session.group:
            self._unindex(session)
            session.group = group
            self._by_group.setdefault(group, {})[client_id] = session
        if language:
            session.language = language
        return session

    def update_settings(self, client_id: str, now_ms: int, settings: ClientSettings, address: str) -> Session:
        session = self.heartbeat(client_id, now_ms, client_type=settings.client_type, group=settings.group)
        session.topics = settings.topics
        session.filters = settings.filters
        session.address = address
        return session

    def open_stream(self, client_id: str, now_ms: int) -> Outbox:
        """A new outbox for a Telemetry stream of ``client_id``; a stream it had before is closed (clients
        reopen their stream after an error, and only the newest one is read)."""
        session = self.heartbeat(client_id, now_ms)
        if session.outbox is not None:
            session.outbox.close()
        session.outbox = Outbox(self._outbox_capacity)
        return session.outbox

    @contextlib.contextmanager
    def receiving(self, client_id: str) -> Iterator[asyncio.Future | None]:
        """Held while a receive of ``client_id`` is open: yields a future done when the client's session ends
        (goodbye or expiry; None without a session), which ends the receive's long poll. A goodbye answers
        after the receives open then (``Session.receives_closed``), so they reach the client before it closes
        its channel: the official Python client logs an error for a receive still open when it shuts down."""
        session = self._sessions.get(client_id)
        if session is None:
            yield None
            return
        loop = asyncio.get_running_loop()
        if session.ended is None:
            session.ended = loop.create_future()
        call = loop.create_future()
        session.open_receives.add(call)
        try:
            yield session.ended
        finally:
            session.open_receives.discard(call)
            call.set_result(None)

    def close_stream(self, client_id: str, outbox: Outbox) -> None:
        """The stream that owned ``outbox`` ended; forget it unless a newer stream replaced it."""
        outbox.close()
        session = self._sessions.get(client_id)
        if session is not None and session.outbox is outbox:
            session.outbox = None

    def remove(self, client_id: str) -> Session | None:
        """Drop a session at once (the client said goodbye); its stream is closed."""
        session = self._sessions.pop(client_id, None)
        if session is not None:
            self._unindex(session)
            if session.outbox is not None:
                session.outbox.said_goodbye = True
            self._close(session)
            log.info("event=grpc_client_terminated client_id=%s client_type=%s", client_id, session.client_type)
        return session

    def expire(self, now_ms: int) -> list[Session]:
        """Drop every session whose last heartbeat is ``heartbeat_timeout_ms`` or more ago; returns them."""
        deadline_ms = now_ms - self.heartbeat_timeout_ms
        expired = [s for s in self._sessions.values() if s.last_heartbeat_ms <= deadline_ms]
        for session in expired:
            del self._sessions[session.client_id]
            self._unindex(session)
            self._close(session)
            log.info(
                "event=grpc_client_expired client_id=%s client_type=%s idle_ms=%d",
                session.client_id,
                session.client_type,
                now_ms - session.last_heartbeat_ms,
            )
        return expired

    def get(self, client_id: str) -> Session | None:
        return self._sessions.get(client_id)

    def consumers_of(self, group: str) -> dict[str, tuple[str, ...]]:
        """Client id -> subscribed topics of the consumers of ``group`` (a producer's session names no group)."""
        return {client_id: s.topics for client_id, s in self._by_group.get(group, {}).items()}

    def online_consumers(self, group: str) -> list[OnlineConsumer]:
        """The group's consumers as admin listings show them (``ConsumerRegistry.add_online_source``)."""
        return [
            OnlineConsumer(
                s.client_id,
                s.address,
                s.language,
                0,  # gRPC clients announce no remoting version number
                s.last_heartbeat_ms,
                "grpc",
                tuple(
                    SubscriptionData(topic, expression or "*", "SQL92" if kind == "SQL" else "TAG")
                    for topic, kind, expression in s.filters
                ),
            )
            for s in self._by_group.get(group, {}).values()
        ]

    def sessions(self) -> list[Session]:
        return list(self._sessions.values())

    def close_all(self) -> None:
        for session in self._sessions.values():
            self._close(session)
        self._sessions.clear()
        self._by_group.clear()

    def _unindex(self, session: Session) -> None:
        if session.group is None:
            return
        members = self._by_group.get(session.group)
        if members is not None:
            members.pop(session.client_id, None)
            if not members:
                del self._by_group[session.group]

    @staticmethod
    def _close(session: Session) -> None:
        if session.outbox is not None:
            session.outbox.close()
            session.outbox = None
        if session.ended is not None and not session.ended.done():
            session.ended.set_result(None)

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, client_id: str) -> bool:
        return client_id in self._sessions

    def __repr__(self) -> str:
        return f"<SessionRegistry sessions={len(self._sessions)} timeout_ms={self.heartbeat_timeout_ms}>"
