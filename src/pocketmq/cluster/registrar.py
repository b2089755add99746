"""Broker registration with the name servers (RocketMQ's ``registerBrokerAll``).

``BrokerRegistrar`` sends REGISTER_BROKER (header: ``BrokerIdentity.register_fields``; body: the
``RegisterBrokerBody`` that ``body_fn()`` builds at that moment) to every name server in parallel:

- once in ``start()``, so a broker that reports itself ready is already in the routes;
- every ``interval_ms`` after that (the heartbeat that keeps the broker from expiring);
- soon after ``trigger()`` (a topic changed): triggers within ``debounce_ms`` make one round, a trigger during a
  round makes one more round after it. ``trigger()`` may be called from any thread.

Rounds never overlap. A name server that is down or refuses is logged and tried again next round; the others
are unaffected. ``unregister()`` stops the rounds and sends UNREGISTER_BROKER to every name server.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable

from pocketmq.cluster.route import BrokerIdentity, RegisterBrokerBody
from pocketmq.errors import RemotingError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.transport import RemotingClient
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock

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
        self._debounce_s = debounce_ms / 1000
        self._round_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self.last_registered_ms: dict[str, int] = {}  # name server -> when it last accepted the registration
        self._failing: set[str] = set()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.register_once()
        self._task = asyncio.create_task(self._run(), name=f"pocketmq-register-{self.identity.broker_name}")

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
            self._wake.set()
            return
        try:
            loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:  # the loop is closed: the broker is shutting down
            pass

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self._interval_ms / 1000):
                    await self._wake.wait()
                await asyncio.sleep(self._debounce_s)  # let a burst of topic changes make one round
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.register_once()
            except Exception:  # a bug in body_fn must not end the heartbeat for good
                log.exception("event=register_round_failed broker=%s", self.identity.broker_name)

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
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise
            self._task = None
        self._loop = None
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
        state = "running" if self._task is not None else "stopped"
        return (
            f"<BrokerRegistrar {self.identity.broker_name}@{self.identity.broker_addr} {state} "
            f"namesrv={self.namesrv_addrs} registered_ms={self.last_registered_ms} "
            f"failing={sorted(self._failing)}>"
        )
