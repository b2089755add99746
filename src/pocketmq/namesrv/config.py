"""The name server's configuration: one frozen dataclass, loaded by ``pocketmq.common.config.load_config``.

Sources, lowest first: these defaults < a TOML file (section ``[namesrv]`` or top level) or a RocketMQ
``namesrv.conf`` (its key names are accepted as aliases) < ``POCKETMQ_*`` environment variables < CLI flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pocketmq.auth.signature import Credentials, credentials_or_none
from pocketmq.protocol.tls import TlsOptions


def _port(value: int) -> str | None:
    return None if 0 <= value <= 65535 else "must be a port number in [0, 65535] (0: the OS picks)"


def _positive(value: int) -> str | None:
    return None if value > 0 else "must be positive"


@dataclass(frozen=True)
class NamesrvConfig(TlsOptions):
    """Everything one name server needs; ``load_config(NamesrvConfig, ...)`` builds it."""

    host: str = field(default="127.0.0.1", metadata={"aliases": ("listenHost",)})
    port: int = field(default=9876, metadata={"aliases": ("listenPort",), "check": _port})
    # A broker not heard from (REGISTER_BROKER or BROKER_HEARTBEAT) for this long leaves every route, unless
    # its registration names its own ``heartbeatTimeoutMillis``. RocketMQ's BROKER_CHANNEL_EXPIRED_TIME.
    broker_expire_ms: int = field(default=120_000, metadata={"check": _positive})
    # How often expired brokers are looked for (RocketMQ's scanNotActiveBrokerInterval).
    scan_interval_ms: int = field(
        default=5_000, metadata={"aliases": ("scanNotActiveBrokerInterval",), "check": _positive}
    )
    # How long a route lookup waits for the brokers asked to auto-create an unknown topic.
    auto_create_timeout_ms: int = field(default=3_000, metadata={"check": _positive})
    # When a broker's registration no longer lists a topic, drop the broker's queues of it (RocketMQ's option
    # of the same name, off by default there too: topics then leave routes only by DELETE_TOPIC_IN_NAMESRV).
    delete_topic_with_broker_registration: bool = field(
        default=False, metadata={"aliases": ("deleteTopicWithBrokerRegistration",)}
    )
    # Access control (docs/security.md): with it on, the commands that change routes (REGISTER_BROKER,
    # UNREGISTER_BROKER, BROKER_HEARTBEAT, DELETE_TOPIC_IN_NAMESRV) must be signed with the cluster's inner
    # credentials, the pair its brokers sign with; the name server signs its own requests to brokers with them.
    authentication_enabled: bool = field(default=False, metadata={"aliases": ("authenticationEnabled",)})
    inner_access_key: str | None = None
    inner_secret_key: str | None = field(default=None, repr=False, metadata={"secret": True})

    def __post_init__(self) -> None:
        from pocketmq.common.errors import ConfigError

        if bool(self.inner_access_key) != bool(self.inner_secret_key):
            raise ConfigError("inner_access_key and inner_secret_key go together: set both or neither")
        if self.authentication_enabled and not self.inner_access_key:
            raise ConfigError("authentication_enabled needs the cluster's inner_access_key and inner_secret_key")

    def inner_credentials(self) -> Credentials | None:
        return credentials_or_none(self.inner_access_key, self.inner_secret_key)
