"""Configuration of the SDK: one frozen dataclass shared by producers, consumers and the admin client."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

DEFAULT_NAMESRV_ADDR = "127.0.0.1:9876"
NAMESRV_ENV = "POCKETMQ_NAMESRV"


def default_namesrv_addr() -> str:
    """``POCKETMQ_NAMESRV`` when set, else ``127.0.0.1:9876`` (RocketMQ's default name server port)."""
    return os.environ.get(NAMESRV_ENV) or DEFAULT_NAMESRV_ADDR


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What every client of one process shares through its ``ClientInstance``.

    ``namesrv_addr`` may list several name servers separated by ``;`` (RocketMQ's form); the first that answers
    is used. ``instance_name`` is the second part of the client id ``ip@instanceName``; RocketMQ defaults it to
    the pid so two processes on one host never share an id.
    """

    namesrv_addr: str = field(default_factory=default_namesrv_addr)
    instance_name: str = field(default_factory=lambda: str(os.getpid()))
    client_ip: str | None = None  # None: the address of the first non-loopback interface, else 127.0.0.1
    request_timeout_s: float = 3.0  # admin, offset and route requests
    connect_timeout_s: float = 3.0
    poll_name_server_interval_ms: int = 30_000  # route refresh period
    heartbeat_broker_interval_ms: int = 30_000
    unit_mode: bool = False

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
        for name in ("request_timeout_s", "connect_timeout_s"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive")
        for name in ("poll_name_server_interval_ms", "heartbeat_broker_interval_ms"):
            if getattr(self, name) < 10:
                problems.append(f"{name} must be at least 10 ms")
        if problems:
            from pocketmq.errors import ConfigError

            raise ConfigError("invalid client configuration: " + "; ".join(problems))

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def with_namesrv(self, namesrv_addr: str) -> "ClientConfig":
        return replace(self, namesrv_addr=namesrv_addr)
