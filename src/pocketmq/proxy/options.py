"""The proxy's settings (``pocketmq proxy`` flags)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pocketmq.broker.pop.renewal import DEFAULT_AUTO_RENEW_INVISIBLE_MS, DEFAULT_RENEW_AHEAD_MS
from pocketmq.client.producer import MAX_MESSAGE_BYTES
from pocketmq.protocol.tls import TlsSettings

DEFAULT_GRPC_PORT = 8081
DEFAULT_USERS_TTL_MS = 3_000


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    namesrv_addr: str
    host: str = "127.0.0.1"
    grpc_port: int = DEFAULT_GRPC_PORT  # 0: the OS picks one, shared by every worker
    workers: int = 1
    max_message_bytes: int = MAX_MESSAGE_BYTES
    client_channel_expire_ms: int = 120_000  # a client without a heartbeat this long is dropped
    client_scan_interval_ms: int = 10_000
    transaction_max_recovery_s: int = 3_600  # the longest check immunity a v2 producer may ask for (as a broker)
    group_settings_ttl_ms: int = 30_000  # how long a consumer group's settings read from the brokers are kept
    request_timeout_s: float = 3.0  # remoting requests to the brokers (long polls add their poll time)
    # a push consumer's message is invisible this long, renewed this long before it runs out (server/auto_renew.py)
    auto_renew_invisible_ms: int = DEFAULT_AUTO_RENEW_INVISIBLE_MS
    auto_renew_ahead_ms: int = DEFAULT_RENEW_AHEAD_MS
    # access control (docs/grpc.md, "Proxy"): the brokers' switches, the user the proxy signs its remoting requests
    # with (a Super user when access control is on: it reads the users' secrets), how long the users read are kept
    authentication_enabled: bool = False
    authorization_enabled: bool = False
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    users_ttl_ms: int = DEFAULT_USERS_TTL_MS
    # TLS on the gRPC port (as a broker's: permissive or enforcing) and to the brokers (``opens_tls``)
    tls: TlsSettings = field(default_factory=TlsSettings)

    def __post_init__(self) -> None:
        if bool(self.access_key) != bool(self.secret_key):
            raise ValueError("access key and secret key go together: give both or neither")
        if self.access_control_enabled and not self.access_key:
            raise ValueError("access control needs the proxy's own user: give --access-key and --secret-key")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        if not 0 <= self.grpc_port <= 65535:
            raise ValueError(f"grpc port {self.grpc_port} is outside [0, 65535]")
        if not 0 < self.auto_renew_ahead_ms < self.auto_renew_invisible_ms:
            raise ValueError(
                f"auto renew: the time ahead ({self.auto_renew_ahead_ms} ms) must be above 0 and below the "
                f"invisible time ({self.auto_renew_invisible_ms} ms)"
            )

    @property
    def access_control_enabled(self) -> bool:
        return self.authentication_enabled or self.authorization_enabled

    @property
    def grpc_addr(self) -> str:
        """The address clients are told to use (QueryRoute), once the port is known."""
        return f"{self.host}:{self.grpc_port}"
