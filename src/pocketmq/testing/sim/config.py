"""Settings of a simulated run, and the known bugs a test can inject to prove the checkers can fail."""

from __future__ import annotations

from dataclasses import dataclass, field

from pocketmq.cluster.breaker import BreakerSettings
from pocketmq.cluster.remote_reader import RetryDelays
from pocketmq.common.topic import pop_retry_topic, revive_topic

GROUPS = ("broker-a", "broker-b")
CLUSTER = "sim"
TOPIC = "orders"
CONSUMER_GROUP = "cg"
QUEUES_PER_GROUP = 2
REVIVE_TOPIC = revive_topic(CLUSTER)
REVIVE_QUEUE_ID = 0  # one revive queue per broker in the simulation
RETRY_TOPIC = pop_retry_topic(CONSUMER_GROUP, TOPIC)
BUGS = ("sync_ack_before_replication", "endless_ck_rewrite", "breaker_ignored", "drop_ending")


@dataclass(frozen=True, slots=True)
class SimConfig:
    chaos_ms: int = 20_000  # faults happen in this first part of a run
    settle_ms: int = 30_000  # then: no faults, every broker up, consumers ack everything
    send_interval_ms: tuple[int, int] = (150, 450)
    pop_interval_ms: tuple[int, int] = (150, 600)
    consumers: int = 2
    pop_batch: int = 4
    invisible_ms: int = 2_000
    ack_probability: float = 0.5  # during the chaos part
    retry_max_times: int = 2
    ck_rewrite_backoff_ms: tuple[int, ...] = (250, 500, 1_000)
    breaker: BreakerSettings = field(default_factory=lambda: BreakerSettings(failure_threshold=2, cool_down_ms=1_500))
    remote_read_timeout_ms: int = 800
    remote_read_delays: RetryDelays = RetryDelays(
        unreachable_ms=1_000, busy_ms=500, no_permission_ms=2_000, other_ms=500
    )
    revive_interval_ms: int = 500
    heartbeat_ms: int = 1_000
    broker_expire_ms: int = 3_000
    rpc_timeout_ms: int = 1_000
    send_timeout_ms: int = 3_000
    ha_ack_timeout_ms: int = 1_500
    ha_slave_expire_ms: int = 3_000
    ha_pull_suspend_ms: int = 500
    ha_lookup_interval_ms: int = 300
    ha_batch_records: int = 32
    flush_latency_ms: tuple[int, int] = (1, 4)  # SYNC_FLUSH: an fsync; --flush-latency-ms 50,400 widens the window
    fault_interval_ms: tuple[int, int] = (400, 2_000)
    restart_after_ms: tuple[int, int] = (300, 5_000)
    fault_length_ms: tuple[int, int] = (300, 4_000)


@dataclass(frozen=True, slots=True)
class Bugs:
    """Deliberate faults in the simulated system (never in PocketMQ): each must make a checker fail."""

    names: frozenset[str] = frozenset()

    def __post_init__(self):
        unknown = self.names - set(BUGS)
        if unknown:
            raise ValueError(f"unknown bugs {sorted(unknown)}; known: {', '.join(BUGS)}")

    def __contains__(self, name: str) -> bool:
        return name in self.names
