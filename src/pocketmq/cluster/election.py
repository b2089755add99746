"""Who is master of a broker group under a controller, and when a master must stop writing (pure decisions).

A controller (etcd) holds, per broker group, a *master lease* (the key exists while its holder renews it),
the *epoch* (a counter bumped in the same transaction that takes the lease, so every tenure has its own
number) and the *in-sync set* the master writes (the brokers that hold every record it confirmed). Brokers
that are up publish a *candidacy* with their log's end. Everything here decides from those facts; the shell
(``cluster/controller.py``) reads and writes them.

- ``decide``: what a broker does given the group's state: keep or become master of epoch E, follow the
  holder, campaign for the lease, wait, or step down.
- Only an *eligible* broker campaigns: one in the in-sync set of the last epoch (or any broker while the
  group never had an epoch: a new group). Among eligible candidates only the one with the longest log
  (ties: the lowest broker id) campaigns: a SYNC send is acknowledged once *one* slave has it, so with two
  slaves the in-sync one that holds the most is the one that holds every acknowledged record.
- ``LeaseTimer``: a master writes only while it is sure its lease is alive. etcd counts a lease's TTL from
  when a keep-alive *reaches* it, which is after the master sent it; so a lease renewed by a keep-alive sent at
  ``t`` lives at least until ``t + ttl``. The master stops writing at ``t + ttl - margin`` (the margin covers
  clock rate differences), before etcd can let anyone else take the lease: no two writers at once.
  With several etcd endpoints, a keep-alive one of them does not answer within ``keepalive_timeout_ms`` is
  sent again to the next at once: renewed every ``ttl / 3``, given up after ``ttl / 6``, the retry leaves
  ``ttl / 2 - margin`` for the round trips, so one silent member does not end a tenure.
- Fencing (``accepts_writes``, ``accepts_replicated``): a master writes only in the newest epoch it knows,
  and a slave takes records only from a master whose epoch is not older than the newest it has seen.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from pocketmq.runtime.clock import Clock

DEFAULT_LEASE_TTL_MS = 2_000
DEFAULT_LEASE_MARGIN_MS = 300  # stop writing this long before the lease could lapse in etcd


@dataclass(frozen=True, slots=True)
class GroupState:
    """What the controller says about one broker group."""

    epoch: int  # the last epoch granted; 0: the group never had a master under the controller
    holder_id: int | None  # the broker holding the master lease; None: nobody (lapsed or never taken)
    in_sync_ids: frozenset[int]  # written by the master of ``epoch`` (itself included)


@dataclass(frozen=True, slots=True)
class Candidate:
    broker_id: int
    log_end: int  # the phys offset where its commit log ends


class Role(enum.Enum):
    NONE = "none"  # just started: neither master nor following anyone yet
    MASTER = "master"
    SLAVE = "slave"


@dataclass(frozen=True, slots=True)
class LocalState:
    """This broker as it is now."""

    broker_id: int
    role: Role
    epoch: int  # the epoch it serves as master, or follows as slave (0: none)
    holds_lease: bool  # for a master: ``LeaseTimer.holds`` now


class Action(enum.Enum):
    STAY = "stay"  # nothing to change
    BECOME_MASTER = "become_master"  # won the lease: start a tenure of ``epoch``
    FOLLOW = "follow"  # follow ``master_id`` (of ``epoch``) as a slave
    CAMPAIGN = "campaign"  # try to take the lease (bumping the epoch)
    WAIT = "wait"  # nobody holds the lease, and this broker may not or should not take it
    STEP_DOWN = "step_down"  # a master that may no longer write: stop at once, then decide again


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    epoch: int = 0
    master_id: int | None = None
    reason: str = ""


def eligible(broker_id: int, state: GroupState) -> bool:
    """Whether ``broker_id`` may take the group's lease: in the last epoch's in-sync set, or any broker of a
    group that never had an epoch."""
    return state.epoch == 0 or broker_id in state.in_sync_ids


def best_candidate(state: GroupState, candidates: Iterable[Candidate]) -> int | None:
    """The eligible candidate that should campaign: the longest log, then the lowest id; None when none is."""
    ranked = sorted((c for c in candidates if eligible(c.broker_id, state)), key=lambda c: (-c.log_end, c.broker_id))
    return ranked[0].broker_id if ranked else None


def decide(local: LocalState, state: GroupState, candidates: Iterable[Candidate]) -> Decision:
    """What ``local`` does given the group's ``state`` and the live ``candidates`` (``local`` among them)."""
    me = local.broker_id
    if local.role is Role.MASTER:
        if not local.holds_lease:
            return Decision(Action.STEP_DOWN, local.epoch, reason="lease not renewed in time")
        if state.epoch > local.epoch:
            return Decision(Action.STEP_DOWN, local.epoch, reason=f"a newer epoch {state.epoch} exists")
        if state.holder_id != me:
            return Decision(Action.STEP_DOWN, local.epoch, reason="the lease is gone from the controller")
        return Decision(Action.STAY, local.epoch, me)
    if state.holder_id == me:
        return Decision(Action.BECOME_MASTER, state.epoch, me)
    if state.holder_id is not None:
        if local.role is Role.SLAVE and local.epoch == state.epoch:
            return Decision(Action.STAY, state.epoch, state.holder_id)
        return Decision(Action.FOLLOW, state.epoch, state.holder_id)
    if not eligible(me, state):
        return Decision(
            Action.WAIT, reason=f"not in the in-sync set {sorted(state.in_sync_ids)} of epoch {state.epoch}"
        )
    best = best_candidate(state, candidates)
    if best is not None and best != me:
        return Decision(Action.WAIT, reason=f"broker {best} has a longer log or a lower id")
    return Decision(Action.CAMPAIGN, state.epoch + 1)


class LeaseTimer:
    """Until when a master may write: the last keep-alive that etcd answered, counted from when it was sent."""

    def __init__(self, clock: Clock, ttl_ms: int = DEFAULT_LEASE_TTL_MS, margin_ms: int = DEFAULT_LEASE_MARGIN_MS):
        if not 0 <= margin_ms < ttl_ms:
            raise ValueError(f"lease margin {margin_ms} ms must be below the TTL {ttl_ms} ms")
        self._clock = clock
        self.ttl_ms = ttl_ms
        self.margin_ms = margin_ms
        self._valid_until_ms: float | None = None

    def sent(self) -> float:
        """Call right before sending a grant or keep-alive; pass the result to ``renewed`` once answered."""
        return self._clock.monotonic_ms()

    def renewed(self, sent_ms: float, granted_ttl_ms: int | None = None) -> None:
        """etcd answered the keep-alive sent at ``sent_ms`` with ``granted_ttl_ms`` left (default: the TTL)."""
        ttl_ms = self.ttl_ms if granted_ttl_ms is None else granted_ttl_ms
        until_ms = sent_ms + ttl_ms - self.margin_ms
        if self._valid_until_ms is None or until_ms > self._valid_until_ms:
            self._valid_until_ms = until_ms

    def lost(self) -> None:
        """The lease is gone (revoked, or etcd said it no longer exists)."""
        self._valid_until_ms = None

    def holds(self) -> bool:
        return self._valid_until_ms is not None and self._clock.monotonic_ms() < self._valid_until_ms

    def remaining_ms(self) -> float:
        if self._valid_until_ms is None:
            return 0.0
        return max(self._valid_until_ms - self._clock.monotonic_ms(), 0.0)

    @property
    def keepalive_interval_ms(self) -> float:
        """Renew three times per TTL, so one lost keep-alive does not end a tenure."""
        return self.ttl_ms / 3

    @property
    def keepalive_timeout_ms(self) -> float:
        """How long a keep-alive waits for its answer before it is sent to the next endpoint."""
        return self.keepalive_interval_ms / 2


def accepts_writes(local: LocalState, newest_epoch_seen: int) -> bool:
    """Whether a master takes sends: it holds its lease and serves the newest epoch it knows."""
    return local.role is Role.MASTER and local.holds_lease and local.epoch >= newest_epoch_seen


def accepts_replicated(master_epoch: int, newest_epoch_seen: int) -> bool:
    """Whether a slave appends records from a master of ``master_epoch``: not from a deposed master."""
    return master_epoch >= newest_epoch_seen
