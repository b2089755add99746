"""Broker registration with the name servers (RocketMQ's ``registerBrokerAll`` and ``registerIncrementBrokerData``).

``BrokerRegistrar`` sends REGISTER_BROKER (header: ``BrokerIdentity.register_fields``; body: the
``RegisterBrokerBody`` that ``body_fn(topics)`` builds at that moment) to every name server in parallel. A round
is either

- *full*: every topic (``body_fn(None)``): once in ``start()``, so a broker that reports itself ready is
  already in the routes, then whenever ``interval_ms`` has passed since the last full round (the heartbeat that
  keeps the broker from expiring, and what a restarted name server learns the whole table from);
- *incremental*: only the topics named by ``trigger(topic)`` since the last round (the body flagged
  ``incremental``: the name server adds them and removes nothing). A trigger's round comes ``debounce_ms``
  later (a burst of changes makes one round); ``register_now()`` runs it at once and returns when the name
  servers have every change triggered before the call (an admin's topic create answers after it, so the route
  shows the topic at once). An incremental round costs the topics changed, not the table: creating topics one
  by one no longer makes the n-th create carry n topics to every name server.

A topic deleted makes the next round full (an incremental body cannot say "gone"), and so does a name server
answering an incremental round with ``pmqWholeTableNeeded`` (it did not know this broker: restarted, or expired
it). ``trigger()`` may be called from any thread. The scheduled rounds are a periodic task (``runtime.periodic``,
``broker-register``) on ``clock``: rounds never overlap, and a round that raises (a bug in ``body_fn``) is counted
and logged by its policy and does not end the heartbeat. A name server that is down or refuses is logged and
tried again: after a failed round the next one is full. ``unregister()`` stops the rounds (after the one in
progress) and sends UNREGISTER_BROKER to every name server.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable, Collection

from pocketmq.common.errors import RemotingError
from pocketmq.metrics import MetricsRegistry
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.route import WHOLE_TABLE_NEEDED, BrokerIdentity, RegisterBrokerBody
from pocketmq.protocol.transport import RemotingClient
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock
from pocketmq.runtime.periodic import PeriodicTask, spawn_watched

log = logging.getLogger(__name__)

_UNREGISTER_TIMEOUT_S = 1.0  # at shutdown: a name server that does not answer at once expires the broker anyway


class BrokerRegistrar:
    def __init__(
        self,
        namesrv_addrs: list[str],
        remoting: RemotingClient,
        body_fn: Callable[[Collection[str] | None], RegisterBrokerBody],  # the named topics; None: all
        interval_ms: int,
        clock: Clock = SYSTEM_CLOCK,
        *,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        ha_server_addr: str = "",
        heartbeat_timeout_ms: int | None = None,
        request_timeout_ms: int = 3_000,
        debounce_ms: int = 50,
        metrics: MetricsRegistry | None = None,
    ):
        if not namesrv_addrs:
            raise ValueError("a broker registers with at least one name server")
        self.namesrv_addrs = list(namesrv_addrs)
        self.identity = BrokerIdentity(
            cluster_name, broker_name, broker_id, broker_addr, ha_server_addr, heartbeat_timeout_ms
        )
        self._remoting = remoting
        self._body_fn = body_fn
        self._interval_ms = interval_ms
        self._clock = clock
        self._request_timeout_s = request_timeout_ms / 1000
        self._round_lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        # a trigger waits debounce_ms: a burst of topic changes makes one round
        self._rounds = PeriodicTask(
            "broker-register",
            self._scheduled_round,
            interval_ms,
            clock=clock,
            metrics=metrics,
            wake_delay_ms=debounce_ms,
        )
        self.last_registered_ms: dict[str, int] = {}  # name server -> when it last accepted the registration
        self._failing: set[str] = set()
        self._changed_topics: set[str] = set()  # named by triggers since the round that last carried them
        self._changes = 0  # triggers so far
        self._changes_registered = 0  # triggers that a finished round covered
        self._full_due_ms = 0.0  # monotonic: when a round woken by a change is a full one
        self._woken = False  # a change woke the scheduled rounds: the next one is for it, not the heartbeat
        self._whole_table_needed = False  # a name server answered an incremental round asking for every topic

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.register_once()
        self._rounds.start()

    def trigger(self, topic: str | None = None, *, whole_table: bool = False) -> None:
        """Register the change soon: ``topic`` changed (created, updated), or with None only what every body says
        besides topics (the broker's flags). ``whole_table``: the next round is a full one (a topic was deleted,
        which an incremental body cannot say). Thread-safe; a no-op before ``start()``."""
        loop = self._loop
        if loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._changed(topic, whole_table)
            return
        try:
            loop.call_soon_threadsafe(self._changed, topic, whole_table)
        except RuntimeError:  # the loop is closed: the broker is shutting down
            pass

    def _changed(self, topic: str | None, whole_table: bool = False) -> None:
        self._changes += 1
        if topic is not None:
            self._changed_topics.add(topic)
        if whole_table:
            self._full_due_ms = 0.0
        self._wake()

    def _wake(self) -> None:
        self._woken = True
        self._rounds.wake()

    async def register_now(self) -> None:
        """Return once the name servers were sent every change triggered before this call (one round at most).
        While a name server is failing the round runs behind the call instead: one that times out would hold
        every caller (each topic create) for its timeout; the scheduled rounds try it again."""
        if self._failing:
            spawn_watched(self._register_changes(), "broker-register-now")
            return
        await self._register_changes()

    async def _scheduled_round(self) -> None:
        woken, self._woken = self._woken, False
        # a round not woken by a change is the heartbeat (its wait has jitter: it may come before full_due)
        if not woken or self._clock.monotonic_ms() >= self._full_due_ms:
            await self.register_once()
        else:
            await self._register_changes()  # nothing when register_now() carried the changes already

    async def register_once(self) -> dict[str, bool]:
        """One full round: register every topic with every name server in parallel; name server -> whether it
        accepted."""
        async with self._round_lock:
            changes, self._changed_topics = self._changes, set()
            accepted = await self._round(self._body_fn(None))
            self._finished(changes, accepted, self._clock.monotonic_ms() + self._interval_ms)
        return dict(zip(self.namesrv_addrs, accepted))

    async def _register_changes(self) -> None:
        async with self._round_lock:
            if self._loop is None or self._changes_registered >= self._changes:
                return  # unregistered, or a round that ended while this one waited for the lock carried them
            changes, topics, self._changed_topics = self._changes, self._changed_topics, set()
            accepted = await self._round(self._body_fn(topics).as_incremental())
            self._finished(changes, accepted, self._full_due_ms)

    def _finished(self, changes: int, accepted: list[bool], full_due_ms: float) -> None:
        # a failed round's changes wait for the next full round, which comes next
        self._changes_registered = changes
        self._full_due_ms = full_due_ms if all(accepted) and not self._whole_table_needed else 0.0
        if self._whole_table_needed:
            self._whole_table_needed = False
            self._wake()  # a name server that answers but knew nothing of this broker: the whole table now

    async def _round(self, body: RegisterBrokerBody) -> list[bool]:
        data = body.to_json()
        fields = self.identity.register_fields(zlib.crc32(data))
        return await asyncio.gather(*(self._register_with(addr, fields, data) for addr in self.namesrv_addrs))

    async def _register_with(self, addr: str, fields: dict, body: bytes) -> bool:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body)
        try:
            response = await self._remoting.invoke(addr, request, self._request_timeout_s)
        except RemotingError as exc:
            return self._failed(addr, str(exc))
        if response.code != ResponseCode.SUCCESS:
            return self._failed(addr, f"code={response.code} remark={response.remark}")
        if (response.ext_fields or {}).get(WHOLE_TABLE_NEEDED) == "true":
            self._whole_table_needed = True
        newly = addr in self._failing or addr not in self.last_registered_ms
        self.last_registered_ms[addr] = self._clock.now_ms()
        if newly:  # the periodic re-registrations are not worth a line each
            log.info(
                "event=broker_registered broker=%s addr=%s namesrv=%s",
                self.identity.broker_name,
                self.identity.broker_addr,
                addr,
            )
        self._failing.discard(addr)
        return True

    def _failed(self, addr: str, reason: str) -> bool:
        self._failing.add(addr)
        log.warning(
            "event=register_failed broker=%s namesrv=%s error=%s retry_in_ms=%d",
            self.identity.broker_name,
            addr,
            reason,
            self._interval_ms,
        )
        return False

    async def unregister(self) -> None:
        """Stop registering and tell every name server this broker is gone (failures only logged)."""
        self._loop = None  # triggers and rounds from now on do nothing
        await self._rounds.stop()
        async with self._round_lock:  # after a round under way (a create's, running behind its answer)
            await asyncio.gather(*(self._unregister_with(addr) for addr in self.namesrv_addrs))

    async def _unregister_with(self, addr: str) -> None:
        request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, self.identity.unregister_fields())
        try:
            response = await self._remoting.invoke(addr, request, _UNREGISTER_TIMEOUT_S)
        except RemotingError as exc:
            log.info("event=unregister_failed broker=%s namesrv=%s error=%s", self.identity.broker_name, addr, exc)
            return
        log.info(
            "event=broker_unregistered broker=%s namesrv=%s code=%s", self.identity.broker_name, addr, response.code
        )

    def __repr__(self) -> str:
        state = "running" if self._rounds.running else "stopped"
        return (
            f"<BrokerRegistrar {self.identity.broker_name}@{self.identity.broker_addr} {state} "
            f"namesrv={self.namesrv_addrs} registered_ms={self.last_registered_ms} "
            f"failing={sorted(self._failing)}>"
        )
