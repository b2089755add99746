"""What one remoting connection, and one server, may hold: the limits, and the decisions that enforce them.

``ConnectionLimits`` is the set a ``RemotingServer`` gives each connection it accepts (the broker builds it from
its config, docs/limits.md). Client connections use ``CLIENT_LIMITS``: the same frame checks, but they never stop
reading because their own write buffer is full (a client whose requests fill its buffer must still read the
replies that drain the broker's) and they have no idle or frame deadline.

``watchdog_verdict`` is the pure decision behind a connection's one timer: close it for an unfinished frame past
its deadline, for idleness, or check again when. ``LimitReporter`` is what happens when a limit is hit: a counter
and a rate-limited log line naming the peer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.runtime.rate_limited_log import RateLimitedLog

log = logging.getLogger(__name__)

MIB = 1024 * 1024
# A frame of the largest message (4 MiB body by default) with its header fits easily; RocketMQ's default too.
DEFAULT_MAX_FRAME_BYTES = 16 * MIB
# What a client accepts: a PULL reply holds up to 8 MiB of records plus one that may be larger, an HA transfer
# what the master's ha_transfer_max_bytes allows.
CLIENT_MAX_FRAME_BYTES = 64 * MIB
# Headers carry the properties (32 KiB by default, a \u0001 separator escaped to six bytes in JSON).
DEFAULT_MAX_HEADER_BYTES = 256 * 1024
# A remoting header nests two deep (the header, its extFields); request bodies (HEART_BEAT) about five.
DEFAULT_MAX_JSON_DEPTH = 32
DEFAULT_MAX_REQUESTS_IN_FLIGHT = 4096
# Reply bytes waiting in a connection's write buffer before the broker stops serving and reading that connection.
DEFAULT_MAX_REPLY_BUFFER_BYTES = 16 * MIB
DEFAULT_FRAME_RECEIVE_TIMEOUT_MS = 30_000
DEFAULT_IDLE_TIMEOUT_MS = 120_000  # as RocketMQ's idle channel close; clients heartbeat every 30 s
DEFAULT_MAX_CONNECTIONS = 10_000
DEFAULT_MAX_CONNECTIONS_PER_HOST = 1_000

METRIC_LIMIT_EXCEEDED = "pocketmq_remoting_limit_exceeded_total"
METRIC_CONNECTIONS = "pocketmq_remoting_connections"

# The ``limit`` label of METRIC_LIMIT_EXCEEDED and the ``limit=`` of the log line, one per enforced limit.
FRAME_BYTES = "frame_bytes"
HEADER_BYTES = "header_bytes"
JSON_DEPTH = "json_depth"
MALFORMED_FRAME = "malformed_frame"
FRAME_RECEIVE_TIMEOUT = "frame_receive_timeout"
IDLE_TIMEOUT = "idle_timeout"
MAX_CONNECTIONS = "max_connections"
MAX_CONNECTIONS_PER_HOST = "max_connections_per_host"
OPEN_FILES = "open_files"
# Not closed: the connection stops reading until its replies drain or its requests finish.
REPLY_BUFFER_BYTES = "reply_buffer_bytes"
REQUESTS_IN_FLIGHT = "requests_in_flight"
BATCH_ACK_BITS = "batch_ack_bits"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    # Requests served at once (long polls included); more are read only once some finish.
    max_requests_in_flight: int = DEFAULT_MAX_REQUESTS_IN_FLIGHT
    # None: replies never stop the connection from reading (clients).
    max_reply_buffer_bytes: int | None = DEFAULT_MAX_REPLY_BUFFER_BYTES
    frame_receive_timeout_ms: int = DEFAULT_FRAME_RECEIVE_TIMEOUT_MS  # 0: none
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS  # 0: none
    max_connections: int = DEFAULT_MAX_CONNECTIONS  # per server
    max_connections_per_host: int = DEFAULT_MAX_CONNECTIONS_PER_HOST  # per client IP address

    @property
    def has_deadlines(self) -> bool:
        return self.frame_receive_timeout_ms > 0 or self.idle_timeout_ms > 0


CLIENT_LIMITS = ConnectionLimits(
    max_frame_bytes=CLIENT_MAX_FRAME_BYTES, max_reply_buffer_bytes=None, frame_receive_timeout_ms=0, idle_timeout_ms=0
)


@dataclass(frozen=True, slots=True)
class WatchdogVerdict:
    close_for: str | None  # FRAME_RECEIVE_TIMEOUT or IDLE_TIMEOUT: close the connection; None: keep it
    next_check_s: float | None  # when to look again (loop time); None: nothing to watch


def watchdog_verdict(
    limits: ConnectionLimits, now_s: float, last_received_s: float, frame_started_s: float | None, busy: bool
) -> WatchdogVerdict:
    """Whether a connection must close now, else when to look again.

    ``last_received_s``: when bytes last arrived; ``frame_started_s``: when the unfinished frame's first bytes
    arrived (None: no frame half-read, or the connection does not read now, by its own choice); ``busy``:
    requests of the peer are being served or wait to be, so the connection is not idle (a long poll).
    """
    checks: list[float] = []
    if limits.frame_receive_timeout_ms > 0 and frame_started_s is not None:
        due = frame_started_s + limits.frame_receive_timeout_ms / 1000
        if now_s >= due:
            return WatchdogVerdict(FRAME_RECEIVE_TIMEOUT, None)
        checks.append(due)
    if limits.idle_timeout_ms > 0:
        idle_s = limits.idle_timeout_ms / 1000
        if busy:
            checks.append(now_s + idle_s)
        else:
            due = last_received_s + idle_s
            if now_s >= due:
                return WatchdogVerdict(IDLE_TIMEOUT, None)
            checks.append(due)
    return WatchdogVerdict(None, min(checks) if checks else None)


class LimitReporter:
    """Counts each exceeded limit (``pocketmq_remoting_limit_exceeded_total{limit}``) and logs it, at most one line
    per limit per ``log_interval_s`` (with how many were not logged), naming the peer."""

    def __init__(self, metrics=None, *, log_interval_s: float = 10.0, clock: Callable[[], float] | None = None):
        self._counter = (
            metrics.counter(
                METRIC_LIMIT_EXCEEDED,
                "requests or connections refused or closed by a remoting limit (docs/limits.md)",
                ("limit",),
            )
            if metrics is not None
            else None
        )
        self._log = RateLimitedLog(log, log_interval_s, clock=clock)

    def exceeded(self, limit: str, remote: str, detail: str) -> None:
        if self._counter is not None:
            self._counter.inc(limit=limit)
        self._log.warning(limit, "event=limit_exceeded limit=%s remote=%s %s", limit, remote, detail)
