"""The broker's configuration: one frozen dataclass, loaded by ``pocketmq.common.config.load_config``.

Sources, lowest first: these defaults < a TOML file (section ``[broker]`` or top level) or a RocketMQ
``broker.conf`` (its key names are accepted as aliases) < ``POCKETMQ_*`` environment variables < CLI flags.
The store's settings live here too (same names and aliases as ``StoreConfig``) and are passed on by
``store_config()``.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pocketmq.auth.signature import Credentials, credentials_or_none
from pocketmq.broker.lite.service import LiteSettings
from pocketmq.broker.pop.rewrite import DEFAULT_CK_REWRITE_BACKOFF_MS, CkEnding, CkRewritePolicy
from pocketmq.broker.timer.delay import DEFAULT_DELAY_LEVELS, delay_levels_problem
from pocketmq.broker.transaction.decision import CheckSettings
from pocketmq.cluster.breaker import BreakerSettings
from pocketmq.cluster.remote_reader import RemoteReadSettings, RetryDelays
from pocketmq.common.topic import LITE_TOPIC_MAX_LENGTH, topic_name_problem
from pocketmq.protocol import limits as remoting
from pocketmq.protocol.tls import TlsOptions
from pocketmq.store.api import FlushMode, StoreConfig

_STORE_FIELDS = {f.name: f for f in dataclasses.fields(StoreConfig)}
_REMOTE_READ_DELAYS = RetryDelays()  # the defaults of the remote_read_retry_* settings


def _store_field(name: str):
    """A field with the same default, checks and broker.conf aliases as ``StoreConfig.<name>``."""
    src = _STORE_FIELDS[name]
    return field(default=src.default, metadata=src.metadata)


def _port(value: int) -> str | None:
    return None if 0 <= value <= 65535 else "must be a port number in [0, 65535] (0: the OS picks)"


def _optional_port(value: int | None) -> str | None:
    return None if value is None else _port(value)


def _positive(value) -> str | None:
    return None if value > 0 else "must be positive"


def _not_negative(value) -> str | None:
    return None if value >= 0 else "must not be negative"


def _ratio(value: float) -> str | None:
    return None if 0.0 <= value <= 1.0 else "must be a ratio in [0, 1]"


# The lowest pop_min_invisible_ms: revive hands a message back within a 10 ms tick and a pass of its invisible
# time, so a shorter one is mostly that; and a client that nacks with ~0 ms redelivers at most 10 times a second.
POP_MIN_INVISIBLE_FLOOR_MS = 100


def _min_invisible(value: int) -> str | None:
    return None if value >= POP_MIN_INVISIBLE_FLOOR_MS else f"must be at least {POP_MIN_INVISIBLE_FLOOR_MS} ms"


def _queue_nums(value: int) -> str | None:
    return None if 1 <= value <= 1024 else "must be in [1, 1024]"


def _backoff(value: tuple) -> str | None:
    return None if value and all(step > 0 for step in value) else "needs at least one step, each > 0 ms"


def _ending(value: str) -> str | None:
    return None if value in ("dlq", "drop") else "must be dlq or drop"


class BrokerRole(enum.Enum):
    """RocketMQ's brokerRole: how a broker takes part in its group's replication (docs/ha.md)."""

    ASYNC_MASTER = "async_master"  # sends return once stored locally; slaves follow behind
    SYNC_MASTER = "sync_master"  # a send returns once a slave has the record (or a slave status on timeout)
    SLAVE = "slave"  # follows the master of its group (broker id 0); refuses sends, serves pulls

    @classmethod
    def parse(cls, text: str) -> BrokerRole:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(f"unknown broker role {text!r} (expected async_master|sync_master|slave)") from None

    @property
    def is_master(self) -> bool:
        return self is not BrokerRole.SLAVE


def _name(value: str) -> str | None:
    return topic_name_problem(value)


def _address(value: str | None) -> str | None:
    if value is None:
        return None
    for part in value.split(";"):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            return f"{part!r} is not HOST:PORT (several are separated by ';')"
    return None


def _one_address(value: str | None) -> str | None:
    if value is not None and ";" in value:
        return "one HOST:PORT only"
    return _address(value)


# Keys of RocketMQ's shipped broker.conf files (and common tuning keys) that name nothing here: a file written for
# RocketMQ starts with a note that they are ignored, and why, instead of being refused.
ROCKETMQ_KEYS_IGNORED = {
    "deleteWhen": "expired segments go once older than file_reserved_hours, at any hour",
    "brokerIP2": "a slave replicates from the master's remoting address",
    "haListenPort": "replication uses the remoting port",
    "storePathCommitLog": "the whole store lives under data_dir, storePathRootDir",
    "storePathConsumeQueue": "the whole store lives under data_dir, storePathRootDir",
    "storePathIndex": "the whole store lives under data_dir, storePathRootDir",
    "storeCheckpoint": "the whole store lives under data_dir, storePathRootDir",
    "abortFile": "the whole store lives under data_dir, storePathRootDir",
    "mapedFileSizeConsumeQueue": "consume queue segments are sized by consume_queue_segment_units",
    "mappedFileSizeConsumeQueue": "consume queue segments are sized by consume_queue_segment_units",
    "sendMessageThreadPoolNums": "one event loop serves every request",
    "pullMessageThreadPoolNums": "one event loop serves every request",
    "useReentrantLockWhenPutMessage": "one event loop serves every request",
    "flushCommitLogLeastPages": "a flush writes whatever is dirty every flush_interval_ms",
    "transientStorePoolEnable": "there is no off-heap write pool",
    "diskMaxUsedSpaceRatio": "set disk_max_used_ratio, a ratio in (0, 1], instead of a percentage",
}


@dataclass(frozen=True)
class BrokerConfig(TlsOptions):
    """Everything one broker process needs; ``load_config(BrokerConfig, ...)`` builds it."""

    # load_config: these keys are accepted, noted and ignored
    IGNORED_KEYS: ClassVar[dict[str, str]] = ROCKETMQ_KEYS_IGNORED

    cluster_name: str = field(default="DefaultCluster", metadata={"aliases": ("brokerClusterName",), "check": _name})
    broker_name: str = field(default="broker-a", metadata={"aliases": ("brokerName",), "check": _name})
    broker_id: int = field(default=0, metadata={"aliases": ("brokerId",), "check": _not_negative})  # 0 = master
    host: str = field(default="127.0.0.1", metadata={"aliases": ("listenHost",)})  # where the sockets bind
    # The IPv4 address clients are told to connect to (routes, offset message ids); None: ``host``.
    advertise_host: str | None = field(default=None, metadata={"aliases": ("brokerIP1",)})
    remoting_port: int = field(default=10911, metadata={"aliases": ("listenPort",), "check": _port})
    # The remoting port clients are told to use when it differs from the bound one (NAT, port mapping).
    advertise_port: int | None = field(default=None, metadata={"check": _optional_port})
    grpc_port: int = field(default=8081, metadata={"aliases": ("grpcServerPort",), "check": _port})
    # Name server address(es) "host:port[;host:port]"; None runs one embedded in this process.
    namesrv_addr: str | None = field(default=None, metadata={"aliases": ("namesrvAddr",), "check": _address})
    namesrv_port: int = field(default=9876, metadata={"check": _port})  # the embedded name server's port
    # Prometheus ``/metrics`` over HTTP (docs/metrics.md); None: not served, 0: the OS picks.
    metrics_port: int | None = field(default=None, metadata={"check": _optional_port})
    # The web console (docs/console.md), with ``/metrics`` too; None: not served, 0: the OS picks.
    console_port: int | None = field(default=None, metadata={"check": _optional_port})
    # While requests come close together, poll the sockets this long before sleeping (runtime/busy_poll.py):
    # less latency when a wake-up is dear (a VM); a broker with a trickle of requests or none sleeps at once.
    # 0: never poll.
    busy_poll_us: int = field(default=200, metadata={"check": _not_negative})
    auto_create_topic_enable: bool = field(default=True, metadata={"aliases": ("autoCreateTopicEnable",)})
    auto_create_subscription_group: bool = field(default=True, metadata={"aliases": ("autoCreateSubscriptionGroup",)})
    default_topic_queue_nums: int = field(
        default=8, metadata={"aliases": ("defaultTopicQueueNums",), "check": _queue_nums}
    )
    max_message_bytes: int = _store_field("max_message_bytes")
    max_properties_bytes: int = field(default=32 * 1024, metadata={"check": _positive})
    long_polling_enable: bool = field(default=True, metadata={"aliases": ("longPollingEnable",)})
    # SQL92 subscriptions (docs/filter.md): off, they are refused with SUBSCRIPTION_PARSE_FAILED.
    enable_property_filter: bool = field(default=True, metadata={"aliases": ("enablePropertyFilter",)})
    # Without long polling a pull that finds nothing is still held this long (RocketMQ's short polling).
    short_polling_ms: int = field(
        default=1000, metadata={"aliases": ("shortPollingTimeMills",), "check": _not_negative}
    )
    long_polling_max_waiters: int = field(default=10_000, metadata={"check": _positive})
    register_interval_ms: int = field(
        default=30_000, metadata={"aliases": ("registerNameServerPeriod",), "check": _positive}
    )
    client_channel_expire_ms: int = field(
        default=120_000, metadata={"aliases": ("channelExpiredTimeout",), "check": _positive}
    )
    client_scan_interval_ms: int = field(default=10_000, metadata={"check": _positive})
    offset_persist_interval_ms: int = field(
        default=5_000, metadata={"aliases": ("flushConsumerOffsetInterval",), "check": _positive}
    )
    # POP consumption (broker/pop): revive pass period, CK rewrite backoff and its ending, invisible time floor.
    pop_revive_interval_ms: int = field(default=1000, metadata={"check": _positive})
    pop_ck_rewrite_backoff_ms: tuple[int, ...] = field(
        default=DEFAULT_CK_REWRITE_BACKOFF_MS, metadata={"check": _backoff}
    )
    pop_ck_rewrite_ending: str = field(default="dlq", metadata={"check": _ending})  # dlq | drop
    # A CK also ends at its first failed read this long after its pop (0: only the table's length ends it).
    pop_ck_rewrite_max_total_ms: int = field(default=0, metadata={"check": _not_negative})
    pop_min_invisible_ms: int = field(default=1000, metadata={"check": _min_invisible})
    pop_state_persist_interval_ms: int = field(default=500, metadata={"check": _positive})
    # Message trace (broker/tracer.py, docs/trace.md): the share of messages traced, and the records queued at most.
    trace_enabled: bool = True
    trace_sample_ratio: float = field(default=0.01, metadata={"check": _ratio})
    trace_queue_capacity: int = field(default=10_000, metadata={"check": _positive})
    # Delayed messages and consumer retries (broker/timer, broker/send_back; docs/retry.md).
    message_delay_level: str = field(
        default=DEFAULT_DELAY_LEVELS, metadata={"aliases": ("messageDelayLevel",), "check": delay_levels_problem}
    )
    timer_max_delay_ms: int = field(default=3 * 86_400_000, metadata={"check": _positive})  # RocketMQ 5: 3 days
    timer_past_tolerance_ms: int = field(default=60_000, metadata={"check": _not_negative})
    # Transactional messages (broker/transaction, docs/transactions.md); all change at run time.
    transaction_timeout_ms: int = field(
        default=6_000, metadata={"aliases": ("transactionTimeOut",), "check": _positive}
    )  # the youngest a half message is checked at
    transaction_check_interval_ms: int = field(
        default=30_000, metadata={"aliases": ("transactionCheckInterval",), "check": _positive}
    )  # between two checks of one half message
    transaction_check_max: int = field(
        default=15, metadata={"aliases": ("transactionCheckMax",), "check": _positive}
    )  # checks before a half message is put aside in TRANS_CHECK_MAX_TIME_TOPIC
    # The longest check immunity a v2 producer may ask for (orphaned_transaction_recovery_duration), seconds.
    transaction_max_recovery_s: int = field(
        default=3_600, metadata={"aliases": ("maxTransactionRecoverySecond",), "check": _positive}
    )
    reject_transaction_message: bool = field(default=False, metadata={"aliases": ("rejectTransactionMessage",)})
    # Where the official RocketMQ 5 clients export their own metrics (an OpenTelemetry collector's OTLP/gRPC
    # "host:port"); the Settings reply hands it out (docs/grpc.md, "Client metrics"). None: client metrics off.
    client_metrics_endpoint: str | None = field(default=None, metadata={"check": _one_address})
    queue_lock_max_live_ms: int = field(
        default=60_000, metadata={"aliases": ("rebalanceLockMaxLiveTime",), "check": _positive}
    )
    # Lite topics (broker/lite, docs/lite.md): the distinct lite topics one consumer group may subscribe (the
    # Settings' lite_subscription_quota), the longest lite topic name (max_lite_topic_size), how long a lite
    # topic lives without a message, and how many one LITE parent topic may hold.
    lite_subscription_quota: int = field(default=2_000, metadata={"check": _positive})
    lite_topic_max_name_length: int = field(default=LITE_TOPIC_MAX_LENGTH, metadata={"check": _positive})
    lite_topic_expire_ms: int = field(default=86_400_000, metadata={"check": _positive})
    lite_topic_max_per_parent: int = field(default=1_000_000, metadata={"check": _positive})
    # Replication (cluster/ha_*.py, docs/ha.md). broker_id 0 is a master; a slave (id > 0) follows the master of
    # its cluster and broker name, found through the name server.
    broker_role: BrokerRole = field(default=BrokerRole.ASYNC_MASTER, metadata={"aliases": ("brokerRole",)})
    # SYNC_MASTER: how long a send waits for a slave's ack before answering FLUSH_SLAVE_TIMEOUT.
    ha_slave_ack_timeout_ms: int = field(default=3_000, metadata={"aliases": ("syncFlushTimeout",), "check": _positive})
    # A slave whose log trails the master's by more is not in sync: SYNC sends answer SLAVE_NOT_AVAILABLE.
    ha_max_gap_bytes: int = field(
        default=256 * 1024 * 1024, metadata={"aliases": ("haMaxGapNotInSync",), "check": _positive}
    )
    ha_slave_expire_ms: int = field(default=10_000, metadata={"check": _positive})  # silent slave: gone
    ha_transfer_max_bytes: int = field(default=4 * 1024 * 1024, metadata={"check": _positive})  # per pull
    ha_pull_suspend_ms: int = field(default=1_000, metadata={"check": _positive})  # a caught-up slave's pull
    ha_master_lookup_interval_ms: int = field(default=1_000, metadata={"check": _positive})
    ha_metadata_sync_interval_ms: int = field(default=3_000, metadata={"check": _positive})
    # RIP-32 (cluster/acting_master.py, cluster/escape.py): with the master gone, the lowest-id live slave runs
    # delay delivery and POP revive; what they write escapes to another group's master (else it waits). Both
    # change at run time (docs/broker.md).
    enable_slave_acting_master: bool = field(default=False, metadata={"aliases": ("enableSlaveActingMaster",)})
    enable_remote_escape: bool = field(default=False, metadata={"aliases": ("enableRemoteEscape",)})
    # The circuit breaker per remote broker (cluster/breaker.py): consecutive failed reads that open it, and
    # how long it stays open before one probe.
    breaker_failure_threshold: int = field(default=5, metadata={"check": _positive})
    breaker_cool_down_ms: int = field(default=10_000, metadata={"check": _not_negative})
    # Reads of messages stored on another broker group (POP revive of escaped CKs; cluster/remote_reader.py):
    # the PULL's timeout (the breaker per remote group is the one above), and how long a failed read suggests
    # waiting before the next try, per kind of failure (a CK then waits the longer of this and its backoff step).
    remote_read_timeout_ms: int = field(default=3_000, metadata={"check": _positive})
    remote_read_retry_unreachable_ms: int = field(
        default=_REMOTE_READ_DELAYS.unreachable_ms, metadata={"check": _positive}
    )
    remote_read_retry_busy_ms: int = field(default=_REMOTE_READ_DELAYS.busy_ms, metadata={"check": _positive})
    remote_read_retry_no_permission_ms: int = field(
        default=_REMOTE_READ_DELAYS.no_permission_ms, metadata={"check": _positive}
    )
    remote_read_retry_other_ms: int = field(default=_REMOTE_READ_DELAYS.other_ms, metadata={"check": _positive})
    # What one client can make the remoting port hold (protocol/limits.py; the table in docs/limits.md).
    remoting_max_frame_bytes: int = field(default=remoting.DEFAULT_MAX_FRAME_BYTES, metadata={"check": _positive})
    remoting_max_header_bytes: int = field(default=remoting.DEFAULT_MAX_HEADER_BYTES, metadata={"check": _positive})
    remoting_max_json_depth: int = field(default=remoting.DEFAULT_MAX_JSON_DEPTH, metadata={"check": _positive})
    remoting_max_requests_in_flight: int = field(
        default=remoting.DEFAULT_MAX_REQUESTS_IN_FLIGHT, metadata={"check": _positive}
    )
    remoting_max_reply_buffer_bytes: int = field(
        default=remoting.DEFAULT_MAX_REPLY_BUFFER_BYTES, metadata={"check": _positive}
    )
    remoting_frame_receive_timeout_ms: int = field(
        default=remoting.DEFAULT_FRAME_RECEIVE_TIMEOUT_MS, metadata={"check": _not_negative}
    )  # 0: none
    remoting_idle_timeout_ms: int = field(
        default=remoting.DEFAULT_IDLE_TIMEOUT_MS, metadata={"check": _not_negative}
    )  # 0: none
    remoting_max_connections: int = field(default=remoting.DEFAULT_MAX_CONNECTIONS, metadata={"check": _positive})
    remoting_max_connections_per_host: int = field(
        default=remoting.DEFAULT_MAX_CONNECTIONS_PER_HOST, metadata={"check": _positive}
    )
    # Access control (docs/security.md); neither changes at run time. Authentication: every request names a user
    # and is signed with its secret; authorization: the user's policies must allow what the request does.
    authentication_enabled: bool = field(default=False, metadata={"aliases": ("authenticationEnabled",)})
    authorization_enabled: bool = field(default=False, metadata={"aliases": ("authorizationEnabled",)})
    # The bootstrap Super user, created at start when missing (env POCKETMQ_ACL_ROOT_USER / _PASSWORD).
    acl_root_user: str | None = None
    acl_root_password: str | None = field(default=None, repr=False, metadata={"secret": True})
    # What this cluster's brokers and name servers sign their own requests with (replication, remote reads,
    # escaped writes, registration); created as a Super user. Every member of the cluster needs the same pair.
    inner_access_key: str | None = None
    inner_secret_key: str | None = field(default=None, repr=False, metadata={"secret": True})
    # Store settings, passed on to StoreConfig.
    data_dir: Path = field(default=Path("data"), metadata={"aliases": ("storePathRootDir",)})
    flush_mode: FlushMode = _store_field("flush_mode")
    commit_log_segment_bytes: int = _store_field("commit_log_segment_bytes")
    consume_queue_segment_units: int = _store_field("consume_queue_segment_units")
    flush_interval_ms: int = _store_field("flush_interval_ms")
    sync_flush_timeout_ms: int = _store_field("sync_flush_timeout_ms")
    flush_block_loop_us: int = _store_field("flush_block_loop_us")
    file_reserved_hours: float = _store_field("file_reserved_hours")
    disk_max_used_ratio: float = _store_field("disk_max_used_ratio")
    cleanup_interval_ms: int = _store_field("cleanup_interval_ms")

    @property
    def access_control_enabled(self) -> bool:
        return self.authentication_enabled or self.authorization_enabled

    def inner_credentials(self) -> Credentials | None:
        return credentials_or_none(self.inner_access_key, self.inner_secret_key)

    @property
    def public_host(self) -> str:
        return self.advertise_host or self.host

    @property
    def is_slave(self) -> bool:
        return self.broker_role is BrokerRole.SLAVE

    def connection_limits(self) -> remoting.ConnectionLimits:
        """The limits of the remoting port's connections."""
        return remoting.ConnectionLimits(
            max_frame_bytes=self.remoting_max_frame_bytes,
            max_header_bytes=self.remoting_max_header_bytes,
            max_json_depth=self.remoting_max_json_depth,
            max_requests_in_flight=self.remoting_max_requests_in_flight,
            max_reply_buffer_bytes=self.remoting_max_reply_buffer_bytes,
            frame_receive_timeout_ms=self.remoting_frame_receive_timeout_ms,
            idle_timeout_ms=self.remoting_idle_timeout_ms,
            max_connections=self.remoting_max_connections,
            max_connections_per_host=self.remoting_max_connections_per_host,
        )

    def role_problem(self) -> str | None:
        """Why broker_id and broker_role do not fit together (RocketMQ: id 0 is the master), or None."""
        if self.is_slave and self.broker_id == 0:
            return "a slave needs --broker-id > 0 (0 is the master of its group)"
        if not self.is_slave and self.broker_id != 0:
            return f"broker id {self.broker_id} is a slave id: use --role slave, or --broker-id 0 for a master"
        return None

    def access_problem(self) -> str | None:
        """Why the access control settings do not fit together, or None."""
        if bool(self.acl_root_user) != bool(self.acl_root_password):
            return "acl_root_user and acl_root_password go together: set both or neither"
        if bool(self.inner_access_key) != bool(self.inner_secret_key):
            return "inner_access_key and inner_secret_key go together: set both or neither"
        if self.access_control_enabled and not self.inner_access_key:
            # without them a broker's own requests (registration, replication) would be refused like anyone's
            return "access control needs the cluster's inner_access_key and inner_secret_key"
        return None

    def store_config(self, remoting_port: int | None = None) -> StoreConfig:
        """The store's config; ``remoting_port`` is the port actually bound (when configured as 0)."""
        shared = {name: getattr(self, name) for name in _STORE_FIELDS if name in _BROKER_FIELD_NAMES}
        return StoreConfig(**shared, store_host=self.public_addr(remoting_port))

    def public_addr(self, remoting_port: int | None = None) -> str:
        """The advertised remoting "host:port"; ``remoting_port`` is the port actually bound."""
        port = self.remoting_port if remoting_port is None else remoting_port
        return f"{self.public_host}:{self.advertise_port or port}"

    def ck_rewrite_policy(self) -> CkRewritePolicy:
        """POP revive's CK rewrite backoff and endings (``pop_ck_rewrite_*``)."""
        return CkRewritePolicy(
            tuple(self.pop_ck_rewrite_backoff_ms),
            CkEnding(self.pop_ck_rewrite_ending),
            self.pop_ck_rewrite_max_total_ms,
        )

    def remote_read_settings(self) -> RemoteReadSettings:
        delays = RetryDelays(
            self.remote_read_retry_unreachable_ms,
            self.remote_read_retry_busy_ms,
            self.remote_read_retry_no_permission_ms,
            self.remote_read_retry_other_ms,
        )
        return RemoteReadSettings(self.remote_read_timeout_ms, delays)

    def transaction_check_settings(self) -> CheckSettings:
        return CheckSettings(
            self.transaction_timeout_ms,
            self.transaction_check_interval_ms,
            self.transaction_check_max,
            int(self.file_reserved_hours * 3_600_000),
        )

    def breaker_settings(self) -> BreakerSettings:
        return BreakerSettings(self.breaker_failure_threshold, self.breaker_cool_down_ms)

    def lite_settings(self) -> LiteSettings:
        return LiteSettings(
            subscription_quota=self.lite_subscription_quota,
            max_name_length=self.lite_topic_max_name_length,
            expire_ms=self.lite_topic_expire_ms,
            max_per_parent=self.lite_topic_max_per_parent,
            client_expire_ms=self.client_channel_expire_ms,
        )

    def metadata_dir(self) -> Path:
        """Where topics, groups and consumer offsets are persisted."""
        return Path(self.data_dir) / "config"


_BROKER_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(BrokerConfig))
