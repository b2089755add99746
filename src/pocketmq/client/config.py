"""Configuration of the SDK: one frozen dataclass shared by producers, consumers and the admin client."""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field, replace

from pocketmq.auth.signature import Credentials, credentials_or_none
from pocketmq.common.namespace import namespace_problem
from pocketmq.protocol.tls import client_context

DEFAULT_NAMESRV_ADDR = "127.0.0.1:9876"
NAMESRV_ENV = "POCKETMQ_NAMESRV"
NAMESPACE_ENV = "POCKETMQ_NAMESPACE"  # the CLI's default namespace


def default_namesrv_addr() -> str:
    """``POCKETMQ_NAMESRV`` when set, else ``127.0.0.1:9876`` (RocketMQ's default name server port)."""
    return os.environ.get(NAMESRV_ENV) or DEFAULT_NAMESRV_ADDR


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What every client of one process shares through its ``ClientInstance``.

    ``namesrv_addr`` may list several name servers separated by ``;`` (RocketMQ's form); the first that answers
    is used. ``instance_name`` is the second part of the client id ``ip@instanceName``; RocketMQ defaults it to
    the pid so two processes on one host never share an id.

    Gray release (docs/gray.md): ``enable_gray_switch`` makes every client of this config gray: its id ends in
    ``@gray``, its producers mark messages gray (property ``PMQ_GRAY`` = ``gray_tag``) and send them to gray
    queues. ``gray_queue_ratio`` says which queues are gray (per broker the last ceil(n * ratio)); every
    client of a gray rollout (gray or not, producers and consumers) must use the same ratio.

    ``namespace``: the topics and groups every client of this config names are the broker's ``namespace%name``
    (``%RETRY%namespace%group`` ...: RocketMQ's rules, common/namespace.py); what the clients hand back (messages,
    queues, results) carries the names without it. "" is no namespace.
    """

    namesrv_addr: str = field(default_factory=default_namesrv_addr)
    instance_name: str = field(default_factory=lambda: str(os.getpid()))
    client_ip: str | None = None  # None: the address of the first non-loopback interface, else 127.0.0.1
    request_timeout_s: float = 3.0  # admin, offset and route requests
    connect_timeout_s: float = 3.0
    poll_name_server_interval_ms: int = 30_000  # route refresh period
    heartbeat_broker_interval_ms: int = 30_000
    unit_mode: bool = False
    namespace: str = ""
    enable_gray_switch: bool = False
    enable_trace: bool = False  # RocketMQ 4.x's enableMsgTrace: trace records of sends and consumes (docs/trace.md)
    gray_tag: str = "gray"  # the value of the PMQ_GRAY property a gray producer stamps
    gray_queue_ratio: float = 0.1
    # How long a synchronous send polls its socket for the reply before it sleeps (client/blocking_channel.py);
    # worth it only beside a busy-polling broker on another CPU. 0: sleep at once.
    sync_reply_busy_poll_us: int = 0
    # TLS on every connection to name servers and brokers (docs/security.md). ``ca_file`` verifies the servers'
    # certificates (chain and host name); without it any certificate is accepted (RocketMQ's test mode).
    # ``tls_cert_file``/``tls_key_file``: this client's certificate, for servers that require one (mutual TLS).
    tls: bool = False
    ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    # Access control (docs/security.md): with both set, every request is signed with them.
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        problems = []
        if not self.namesrv_addrs:
            problems.append("namesrv_addr is empty")
        for addr in self.namesrv_addrs:
            host, _, port = addr.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                problems.append(f"name server address {addr!r} is not HOST:PORT")
        if not self.instance_name or "@" in self.instance_name:
            problems.append(f"instance_name {self.instance_name!r} must be non-empty and without '@'")
        if problem := namespace_problem(self.namespace):
            problems.append(problem)
        if not 0.0 <= self.gray_queue_ratio <= 1.0:
            problems.append(f"gray_queue_ratio {self.gray_queue_ratio} is outside [0, 1]")
        if not self.gray_tag or self.gray_tag.lower() == "false":
            problems.append(f"gray_tag {self.gray_tag!r} must be non-empty and not 'false'")
        if bool(self.access_key) != bool(self.secret_key):
            problems.append("access_key and secret_key go together: set both or neither")
        if self.sync_reply_busy_poll_us < 0:
            problems.append(f"sync_reply_busy_poll_us {self.sync_reply_busy_poll_us} must not be negative")
        if not self.tls and (self.ca_file or self.tls_cert_file):
            problems.append("ca_file and tls_cert_file need tls=True")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            problems.append("tls_cert_file and tls_key_file go together")
        for name in ("request_timeout_s", "connect_timeout_s"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive")
        for name in ("poll_name_server_interval_ms", "heartbeat_broker_interval_ms"):
            if getattr(self, name) < 10:
                problems.append(f"{name} must be at least 10 ms")
        if problems:
            from pocketmq.common.errors import ConfigError

            raise ConfigError("invalid client configuration: " + "; ".join(problems))

    def ssl_context(self) -> ssl.SSLContext | None:
        """The context every connection of these clients uses, or None for plaintext."""
        if not self.tls:
            return None
        return client_context(self.ca_file, self.tls_cert_file, self.tls_key_file)

    @property
    def credentials(self) -> Credentials | None:
        return credentials_or_none(self.access_key, self.secret_key)

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def with_namesrv(self, namesrv_addr: str) -> ClientConfig:
        return replace(self, namesrv_addr=namesrv_addr)
