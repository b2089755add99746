"""Broker registration with the name servers (RocketMQ's ``registerBrokerAll``).

``BrokerRegistrar`` sends REGISTER_BROKER (header: ``BrokerIdentity.register_fields``; body: the
``RegisterBrokerBody`` that ``body_fn()`` builds at that moment) to every name server in parallel:

- once in ``start()``, so a broker that reports itself ready is already in the routes;
- every ``interval_ms`` after that (the heartbeat that keeps the broker from expiring);
- soon after ``trigger()`` (a topic changed): triggers within ``debounce_ms`` make one round, a trigger during a
  round makes one more round after it. ``trigger()`` may be called from any thread.

The rounds after the first are a periodic task (``runtime.periodic``, ``broker-register``) on ``clock``: they
never overlap, and a round that raises (a bug in ``body_fn``) is counted and logged by its policy and does not
end the heartbeat. A name server that is down or refuses is logged and tried again next round; the others are
unaffected. ``unregister()`` stops the rounds (after the one in progress) and sends UNREGISTER_BROKER to every
name server.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable

from pocketmq.common.errors import RemotingError
from pocketmq.metrics import MetricsRegistry
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.route import BrokerIdentity, RegisterBrokerBody
from pocketmq.protocol.transport import RemotingClient
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock
from pocketmq.runtime.periodic import PeriodicTask

log = logging.getLogger(__name__)

_UNREGISTER_TIMEOUT_S = 1.0  # at shutdown: a name server that does not answer at once expires the broker anyway


class BrokerRegistrar:
    def __init__(
        self,
        namesrv_addrs: list[str],
        remoting: RemotingClient,
        body_fn: Callable[[], RegisterBrokerBody],
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
            self.register_once,
            interval_ms,
            clock=clock,
            metrics=metrics,
            wake_delay_ms=debounce_ms,
        )
        self.last_registered_ms: dict[str, int] = {}  # name server -> when it last accepted the registration
        self._failing: set[str] = set()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.register_once()
        self._rounds.start()

    def trigger(self) -> None:
        """Register again soon (the topic table changed). Thread-safe; a no-op before ``start()``."""
        loop = self._loop
        if loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._rounds.wake()
            return
        try:
            loop.call_soon_threadsafe(self._rounds.wake)
        except RuntimeError:  # the loop is closed: the broker is shutting down
            pass

    async def register_once(self) -> dict[str, bool]:
        """One round: register with every name server in parallel; name server -> whether it accepted."""
        async with self._round_lock:
            body = self._body_fn().to_json()
            fields = self.identity.register_fields(zlib.crc32(body))
            accepted = await asyncio.gather(*(self._register_with(addr, fields, body) for addr in self.namesrv_addrs))
        return dict(zip(self.namesrv_addrs, accepted))

    async def _register_with(self, addr: str, fields: dict, body: bytes) -> bool:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body)
        try:
            response = await self._remoting.invoke(addr, request, self._request_timeout_s)
        except RemotingError as exc:
            return self._failed(addr, str(exc))
        if response.code != ResponseCode.SUCCESS:
            return self._failed(addr, f"code={response.code} remark={response.remark}")
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
        self._loop = None  # triggers from now on do nothing
        await self._rounds.stop()
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
