"""The fault schedule of a chaos run: a pure function of a seed.

A run has five server processes (the name server, ``a0``/``a1`` = group A's SYNC master and slave, ``b0``/``b1``
= group B's) and two client processes (``sdk``: the harness itself, ``official``: the official client's
subprocess). ``generate(seed, duration_s)`` picks faults on that cast; the runner applies each at ``at_s`` and
heals it ``duration_s`` later. The same seed always gives the same schedule, so ``describe`` of a failing run is
what ``make chaos SEED=N`` replays (the processes' timing is real, so the interleaving around a fault is not).
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field, replace

NAMESRV = "namesrv"
GROUPS = {"a": ("a0", "a1"), "b": ("b0", "b1")}  # group -> (master, slave)
BROKERS = ("a0", "a1", "b0", "b1")
SERVERS = (NAMESRV, *BROKERS)
CLIENTS = ("sdk", "official")
PROCESSES = (*SERVERS, *CLIENTS)


class FaultKind(enum.Enum):
    KILL = "kill"  # kill -9, start again when healed
    PAUSE = "pause"  # SIGSTOP, SIGCONT when healed
    PARTITION = "partition"  # the proxy stalls every byte between target and peer until healed
    DELAY = "delay"  # the proxy holds every chunk between target and peer for delay_ms
    DISK_FULL = "disk_full"  # a ballast file fills the tmpfs of the target broker's data dir
    CORRUPT = "corrupt"  # stop the broker, overwrite the last corrupt_bytes of its commit log, start again


ALL_KINDS = frozenset(FaultKind)
# Kinds that take a process (or its data) away: at most one per broker group at a time, so each group keeps a
# member and the SYNC guarantee (a SEND_OK is on both) always leaves one copy to read.
_PROCESS_KINDS = frozenset({FaultKind.KILL, FaultKind.PAUSE, FaultKind.CORRUPT})


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    at_s: float
    duration_s: float
    target: str
    peer: str | None = None  # PARTITION, DELAY: the other end
    delay_ms: int = 0  # DELAY
    corrupt_bytes: int = 0  # CORRUPT
    clean_stop: bool = True  # CORRUPT: SIGTERM (True) or kill -9 before corrupting

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s

    def describe(self) -> str:
        what = {
            FaultKind.PARTITION: f"{self.target} <-/-> {self.peer}",
            FaultKind.DELAY: f"{self.target} <-{self.delay_ms}ms-> {self.peer}",
            FaultKind.CORRUPT: f"{self.target} last {self.corrupt_bytes} bytes after "
            f"{'a clean stop' if self.clean_stop else 'kill -9'}",
        }.get(self.kind, self.target)
        return f"t={self.at_s:6.2f}s +{self.duration_s:4.2f}s {self.kind.value:<9} {what}"


@dataclass(frozen=True)
class Schedule:
    seed: int
    duration_s: float
    disk_broker: str  # the broker whose data dir is a small tmpfs (DISK_FULL faults target it)
    faults: tuple[Fault, ...] = field(default=())

    def describe(self) -> str:
        head = f"seed {self.seed}: {len(self.faults)} faults in {self.duration_s:g} s, tmpfs on {self.disk_broker}"
        return "\n".join([head, *("  " + f.describe() for f in self.faults)])

    def without(self, kinds: frozenset[FaultKind]) -> Schedule:
        """The same schedule without faults of ``kinds`` (e.g. DISK_FULL where mounting a tmpfs is impossible)."""
        return replace(self, faults=tuple(f for f in self.faults if f.kind not in kinds))

    def kinds(self) -> frozenset[FaultKind]:
        return frozenset(f.kind for f in self.faults)


def group_of(process: str) -> str | None:
    return next((g for g, members in GROUPS.items() if process in members), None)


def _conflicts(candidate: Fault, active: list[Fault]) -> bool:
    """True when ``candidate`` would overlap a fault it must not run beside."""
    for other in active:
        if candidate.kind in _PROCESS_KINDS and other.kind in _PROCESS_KINDS:
            same_group = group_of(candidate.target) is not None and group_of(candidate.target) == group_of(other.target)
            if same_group or candidate.target == other.target:
                return True
        if candidate.kind is other.kind and candidate.target == other.target and candidate.peer == other.peer:
            return True
        if candidate.kind is FaultKind.DISK_FULL and other.kind is FaultKind.DISK_FULL:
            return True
        # the harness reads the log through mmap to corrupt it; a full tmpfs can SIGBUS that read
        if {candidate.kind, other.kind} == {
            FaultKind.DISK_FULL,
            FaultKind.CORRUPT,
        } and candidate.target == other.target:
            return True
    return False


def _pick(rng: random.Random, kind: FaultKind, at_s: float, disk_broker: str) -> Fault:
    duration_s = round(rng.uniform(1.0, 6.0), 2)
    if kind is FaultKind.KILL:
        return Fault(kind, at_s, duration_s, rng.choice(PROCESSES))
    if kind is FaultKind.PAUSE:
        return Fault(kind, at_s, round(rng.uniform(0.5, 4.0), 2), rng.choice((*SERVERS, "official")))
    if kind in (FaultKind.PARTITION, FaultKind.DELAY):
        target, peer = rng.sample(PROCESSES, 2)
        if target in CLIENTS and peer in CLIENTS:  # clients never talk to each other: make it a server pair
            peer = rng.choice(SERVERS)
        delay_ms = rng.choice((20, 50, 200, 800)) if kind is FaultKind.DELAY else 0
        return Fault(kind, at_s, duration_s, target, peer, delay_ms=delay_ms)
    if kind is FaultKind.DISK_FULL:
        return Fault(kind, at_s, duration_s, disk_broker)
    return Fault(
        kind, at_s, duration_s, rng.choice(BROKERS), corrupt_bytes=rng.randint(16, 200), clean_stop=rng.random() < 0.5
    )


def generate(
    seed: int,
    duration_s: float,
    *,
    kinds: frozenset[FaultKind] = ALL_KINDS,
    mean_gap_s: float = 2.0,
    max_active: int = 2,
) -> Schedule:
    """Faults starting in [1 s, duration_s - 1 s), each healed by ``duration_s``; ``kinds`` limits the choice.

    Gaps between starts are exponential around ``mean_gap_s``; at most ``max_active`` faults at once, never two
    process faults in one broker group, never the same fault twice at once. A candidate that does not fit is
    dropped (the draw still happens, so the rest of the schedule does not shift)."""
    if duration_s < 3:
        raise ValueError(f"a chaos run needs at least 3 s, got {duration_s}")
    if not kinds:
        raise ValueError("no fault kinds to choose from")
    rng = random.Random(seed)
    disk_broker = rng.choice(BROKERS)
    order = sorted(kinds, key=lambda k: k.value)
    faults: list[Fault] = []
    at_s = 1.0
    while True:
        at_s += rng.expovariate(1.0 / mean_gap_s)
        if at_s >= duration_s - 1.0:
            break
        fault = _pick(rng, rng.choice(order), round(at_s, 2), disk_broker)
        fault = replace(fault, duration_s=round(min(fault.duration_s, duration_s - fault.at_s), 2))
        active = [f for f in faults if f.end_s > fault.at_s]
        if len(active) < max_active and not _conflicts(fault, active):
            faults.append(fault)
    return Schedule(seed, duration_s, disk_broker, tuple(faults))
