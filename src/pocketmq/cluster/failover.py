"""The failover loop: reads the group's state from the controller, decides (``election.decide``) and acts
through the broker's role handler.

It runs on every change the controller's watch reports and at least every third of the lease TTL, and
wakes when the master's lease would lapse, so a master that cannot renew steps down on time even when
etcd does not answer at all. A campaign first publishes this broker's log end and waits
``campaign_settle_ms``, so the other candidates' log ends (published the same way when they saw the lease
go) are in before the longest log is picked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from pocketmq.cluster.controller import ControllerError, EtcdController
from pocketmq.cluster.election import Action, Decision, LocalState, Role, decide
from pocketmq.cluster.epoch_fence import EpochFence, GroupSummary
from pocketmq.cluster.failover_metrics import FailoverStats

log = logging.getLogger(__name__)

CAMPAIGN_SETTLE_MS = 200
IN_SYNC_CHECK_MS = 200  # a master looks this often whether its in-sync set changed


class RoleHandler(Protocol):
    """What the broker does when the loop decides (``cluster/failover_roles.py`` for a real broker)."""

    async def become_master(self, epoch: int) -> None: ...

    async def follow(self, master_id: int, master_address: str, epoch: int) -> None: ...

    async def step_down(self) -> None: ...

    def log_end(self) -> int: ...

    def in_sync_addresses(self) -> frozenset[str]:
        """For a master: the addresses of the slaves in sync (caught up within ``ha_max_gap_bytes``)."""
        ...


class FailoverLoop:
    def __init__(
        self,
        controller: EtcdController,
        handler: RoleHandler,
        *,
        campaign_settle_ms: int = CAMPAIGN_SETTLE_MS,
        fence: EpochFence | None = None,
        stats: FailoverStats | None = None,
    ):
        self.controller = controller
        self.fence = fence if fence is not None else EpochFence()  # the newest epoch read, for replication
        self.stats = stats if stats is not None else FailoverStats()  # elections, time without a master
        self._handler = handler
        self._settle_ms = campaign_settle_ms
        self.role = Role.NONE
        self.epoch = 0
        self.last_decision: Decision | None = None
        self._resign_pending = False  # a master whose lease stopped holding gives it up at the next step
        self._published_in_sync: frozenset[int] | None = None
        # broker id -> remoting address of every broker seen (ports stay over rounds): a slave whose lease lapsed
        # (paused, or cut off from etcd) but that replication still counts in sync keeps its place in the set
        self._known_addresses: dict[int, str] = {}
        self._task: asyncio.Task | None = None
        self._stopping = False

    @property
    def local(self) -> LocalState:
        return LocalState(self.controller.broker_id, self.role, self.epoch, self.controller.lease.holds())

    async def start(self) -> None:
        await self.controller.start()
        self._task = asyncio.create_task(self._run(), name="failover-loop")

    async def stop(self) -> None:
        self._stopping = True  # the client may turn a cancellation into an error: the loop checks this too
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.controller.stop()

    async def _run(self) -> None:
        lease = self.controller.lease
        failing = False
        while not self._stopping:
            try:
                await self.step()
                failing = False
            except ControllerError as exc:
                if not failing:
                    log.warning("event=failover_step_failed broker_id=%d error=%s", self.controller.broker_id, exc)
                failing = True
            except Exception:  # a bug must not end the loop: a master would then never step down
                log.exception("event=failover_step_crashed broker_id=%d", self.controller.broker_id)
            if self.role is Role.MASTER and not lease.holds():
                await self._lease_lapsing("lease not renewed in time (etcd unreachable)")
            wait_ms = lease.keepalive_interval_ms
            if self.role is Role.MASTER:  # also: publish a slave that caught up soon, so it may take over
                wait_ms = min(IN_SYNC_CHECK_MS, lease.remaining_ms() + 1)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.controller.changed.wait(), wait_ms / 1000)
            self.controller.changed.clear()

    async def step(self) -> Decision:
        """One decision and its action."""
        if self.role is Role.MASTER and not self.controller.lease.holds():
            await self._lease_lapsing("lease not renewed in time")  # before any etcd request that may hang
        if self._resign_pending:
            await self.controller.resign()
            self._resign_pending = False
        await self.controller.publish_log_end(self._handler.log_end())
        view = await self.controller.read()
        state = view.state
        self.fence.saw(state.epoch)
        self.stats.observed(state.epoch, state.holder_id)
        self._known_addresses.update(view.addresses)
        master_address = view.addresses.get(state.holder_id, "") if state.holder_id is not None else ""
        self.fence.view = GroupSummary(
            state.epoch, state.holder_id, master_address, tuple(sorted(state.in_sync_ids)), view.holder_lease_id
        )
        decision = decide(self.local, view.state, view.candidates)
        if view.state.holder_id == self.controller.broker_id and view.holder_lease_id != self.controller.lease_id:
            # our own key on a lease we gave up (its renewals stopped): it lapses soon, and our lease timer is
            # not its timer, so this broker may not write under it
            why = "the master key is on an old lease of this broker"
            action = Action.STEP_DOWN if self.role is Role.MASTER else Action.WAIT
            decision = Decision(action, self.epoch, reason=why)
        self._note(decision)
        if decision.action is Action.STEP_DOWN:
            await self._step_down(decision.reason)
            with contextlib.suppress(ControllerError):
                await self.controller.resign()
        elif decision.action is Action.CAMPAIGN:
            await asyncio.sleep(self._settle_ms / 1000)
            view = await self.controller.read()
            decision = decide(self.local, view.state, view.candidates)
            if decision.action is Action.CAMPAIGN and await self.controller.campaign(decision.epoch):
                self.controller.changed.set()  # the next step becomes master
        elif decision.action is Action.BECOME_MASTER:
            await self._handler.become_master(decision.epoch)
            self.role, self.epoch = Role.MASTER, decision.epoch
            self._published_in_sync = None
            self.stats.won += 1
            log.warning("event=failover_master broker_id=%d epoch=%d", self.controller.broker_id, decision.epoch)
        elif decision.action is Action.FOLLOW:
            assert decision.master_id is not None
            address = view.addresses[decision.master_id]
            await self._handler.follow(decision.master_id, address, decision.epoch)
            self.role, self.epoch = Role.SLAVE, decision.epoch
            log.warning(
                "event=failover_follow broker_id=%d master_id=%d master=%s epoch=%d",
                self.controller.broker_id,
                decision.master_id,
                address,
                decision.epoch,
            )
        if self.role is Role.MASTER:
            addresses = self._handler.in_sync_addresses()
            known = self._known_addresses.items()
            in_sync = frozenset({self.controller.broker_id}) | {i for i, a in known if a in addresses}
            if in_sync != self._published_in_sync and await self.controller.publish_in_sync(self.epoch, in_sync):
                self._published_in_sync = in_sync
        return decision

    async def _lease_lapsing(self, reason: str) -> None:
        """Step down, and give the lease up before anything else: etcd may not have counted it out (it was
        paused, or the renewals were late), and this broker's next tenure must be a new epoch."""
        await self._step_down(reason)
        self._resign_pending = True

    async def _step_down(self, reason: str) -> None:
        if self.role is not Role.MASTER:
            return
        await self._handler.step_down()
        log.warning(
            "event=failover_step_down broker_id=%d epoch=%d reason=%s", self.controller.broker_id, self.epoch, reason
        )
        self.role = Role.NONE

    def _note(self, decision: Decision) -> None:
        last = self.last_decision
        if last is None or (last.action, last.reason) != (decision.action, decision.reason):
            if decision.action is Action.WAIT:
                log.info("event=failover_wait broker_id=%d reason=%s", self.controller.broker_id, decision.reason)
        self.last_decision = decision
