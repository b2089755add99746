"""Slave acting master (RocketMQ RIP-32): which broker of a group runs its special services.

The special services (delay/timer delivery and POP revive) run on the lowest-id live broker of the group:
the master (id 0) while it lives; with ``enable_slave_acting_master``, when the master is gone from the name
server's cluster info, the lowest-id live slave. When the master comes back the slave stops them: either the
master announced itself (ACTING_MASTER_HANDOVER at its start, ``master_back``: the slave stops at once and
does not act again for ``handover_grace_ms`` unless the master is gone again after it) or the name server
shows id 0 again.

``should_act`` is the pure decision; ``ActingMasterElection`` the shell: from ``start()`` to ``stop()`` it reads
the cluster info every ``check_interval_ms`` (a periodic task, ``broker-acting-master``) and starts or stops the
services (an object with ``async start()`` / ``async stop()``, ``handover_due`` and ``async
offer_progress(master_addr)``), logging and counting each change
(``pocketmq_acting_master`` 1 while acting, 0 otherwise, and ``pocketmq_acting_master_changes_total{to,reason}``;
docs/metrics.md). A name server that does not answer changes nothing (the state stays as it was). ``stop()``
(shutdown) stops the services too, when acting.

A master that shows up again without having announced itself did not restart (it was frozen or cut off), so it
never asked for what the slave did meanwhile: while the services say a handover is due, each check that finds
the master listed and this slave not acting has them offer it to the master (one offer at a time, in the
background, so that the checks go on).

A name server that restarted knows no broker until each registers again (within ``register_interval_ms``), so
its view can lack a master that is alive, and a slave acting beside its live master hands out messages the
master hands out again (after an OK ack, too). So a master missing from a view is gone at once only when the
slave saw it go (the view right before listed it, no failed lookup between); after failed lookups (the slave's
first view, a name server that was down) it is gone only if it has not answered the slave's replication for
``absence_confirm_ms`` either (``master_answered_ms``: a registration interval, within which a live master is
back in the name server). A view that lists neither the slave nor its master (nobody registered again yet)
changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from pocketmq.common.errors import PocketMQError
from pocketmq.metrics import MetricsRegistry
from pocketmq.protocol.route import MASTER_ID
from pocketmq.runtime.periodic import PeriodicTask

log = logging.getLogger(__name__)

HANDOVER_GRACE_MS = 30_000  # a master that announced itself has this long to show up in the name server
DEFAULT_ABSENCE_CONFIRM_MS = 30_000  # RocketMQ's registration interval
MonotonicMs = Callable[[], float | None]


def should_act(
    broker_id: int, live_ids: Iterable[int], *, enabled: bool, master_back_until_ms: int, now_ms: int
) -> bool:
    """Whether the slave ``broker_id`` runs its group's special services, given the live broker ids of its group
    in the name server (``broker_id`` itself counts as live)."""
    if broker_id == MASTER_ID or not enabled or now_ms < master_back_until_ms:
        return False
    live = set(live_ids) | {broker_id}
    return MASTER_ID not in live and broker_id == min(live)


class ActingMasterElection:
    def __init__(
        self,
        namesrv,
        services,
        clock,
        *,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        enabled: Callable[[], bool],
        check_interval_ms: int,
        handover_grace_ms: int = HANDOVER_GRACE_MS,
        absence_confirm_ms: int = DEFAULT_ABSENCE_CONFIRM_MS,
        master_answered_ms: MonotonicMs = lambda: None,
        metrics: MetricsRegistry | None = None,
    ):
        self._namesrv = namesrv
        self._services = services
        self._clock = clock
        self._cluster_name = cluster_name
        self._broker_name = broker_name
        self._broker_id = broker_id
        self._enabled = enabled
        self._grace_ms = handover_grace_ms
        self._master_back_until_ms = 0
        self._absence_confirm_ms = absence_confirm_ms
        self._master_answered_ms = master_answered_ms  # when the master last answered our replication (monotonic)
        self._previous_listed_master: bool | None = None  # None: no view just before this one (see the doc)
        self._lock = asyncio.Lock()
        self._lookup_failure: str | None = None
        self._offering: asyncio.Task | None = None
        self.acting = False
        metrics = metrics if metrics is not None else MetricsRegistry()
        self._checks = PeriodicTask(
            "broker-acting-master", self.check_once, check_interval_ms, clock=clock, metrics=metrics, immediately=True
        )
        self._acting_gauge = metrics.gauge("pocketmq_acting_master", "1 while this slave acts as master of its group")
        self._acting_gauge.set(0)
        self._changes = metrics.counter(
            "pocketmq_acting_master_changes_total",
            "Starts and stops of acting as master, by new state and reason",
            ("to", "reason"),
        )

    def start(self) -> None:
        self._checks.start()

    async def stop(self) -> None:
        """Stop checking (after the check in progress) and the services this election started."""
        await self._checks.stop()
        if self._offering is not None:
            self._offering.cancel()
            await asyncio.gather(self._offering, return_exceptions=True)
        if self.acting:
            await self._set(False, "shutdown", ())

    async def check_once(self) -> None:
        if not self._enabled() and not self.acting:
            return  # switched off: no name server lookups (the switch is read again next time: dynamic config)
        try:
            info = await self._namesrv.cluster_info()
        except PocketMQError as exc:
            if self._lookup_failure != str(exc):
                log.warning(
                    "event=acting_master_lookup_failed broker=%s/%d error=%s", self._broker_name, self._broker_id, exc
                )
            self._lookup_failure = str(exc)
            self._previous_listed_master = None
            return
        self._lookup_failure = None
        group = info.broker_addr_table.get(self._broker_name)
        live = tuple(sorted(group.broker_addrs)) if group and group.cluster == self._cluster_name else ()
        if self._broker_id not in live and MASTER_ID not in live:
            self._previous_listed_master = None  # nobody registered again yet: this view says nothing
            return
        now_ms = self._clock.now_ms()
        listed_before, self._previous_listed_master = self._previous_listed_master, MASTER_ID in live
        if MASTER_ID in live:
            self._master_back_until_ms = 0  # it is registered: the grace of its announcement is over
        elif not listed_before and not self.acting and self._answered_lately():
            return  # not seen to go, and it answered lately: alive, not registered again yet
        act = should_act(
            self._broker_id,
            live,
            enabled=self._enabled(),
            master_back_until_ms=self._master_back_until_ms,
            now_ms=now_ms,
        )
        why = "master_gone" if act else ("master_back" if MASTER_ID in live else "not_lowest_or_disabled")
        await self._set(act, why, live)
        if group is not None and MASTER_ID in live and not self.acting and self._services.handover_due:
            self._offer(group.broker_addrs[MASTER_ID])

    def _offer(self, master_addr: str) -> None:
        if self._offering is None or self._offering.done():
            self._offering = asyncio.create_task(
                self._services.offer_progress(master_addr), name=f"acting-progress-offer-{self._broker_name}"
            )

    async def master_back(self) -> None:
        """The master announced its return (handover): stop now, and stay stopped while it registers."""
        self._master_back_until_ms = self._clock.now_ms() + self._grace_ms
        await self._set(False, "master_handover", ())

    def _answered_lately(self) -> bool:
        answered_ms = self._master_answered_ms()
        return answered_ms is not None and self._clock.monotonic_ms() - answered_ms < self._absence_confirm_ms

    async def _set(self, act: bool, why: str, live: tuple[int, ...]) -> None:
        async with self._lock:
            if act == self.acting:
                return
            if act:
                await self._services.start()
            else:
                await self._services.stop()
            self.acting = act
        self._acting_gauge.set(1 if act else 0)
        self._changes.inc(to="acting" if act else "stopped", reason=why)
        log.warning(
            "event=acting_master_%s broker=%s/%d reason=%s live_ids=%s",
            "started" if act else "stopped",
            self._broker_name,
            self._broker_id,
            why,
            list(live),
        )

    def __repr__(self) -> str:
        return f"<ActingMasterElection {self._broker_name}/{self._broker_id} acting={self.acting}>"
