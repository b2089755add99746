"""The typed request headers of the name server's requests, declared once for the brokers and clients that send
them and the name server that parses them (``protocol.headers``).

Fields and names are RocketMQ's (``remoting/.../protocol/header/namesrv/``), in the order PocketMQ sends them.
Topics are plain bounded text here, not checked as topic names: a lookup of a name no broker would accept is
answered TOPIC_NOT_EXIST, as RocketMQ's name server answers it. The name server's own rules (a broker address
is HOST:PORT, a heartbeat timeout of 0 or less means its default) stay with it (``namesrv.server``).
"""

from __future__ import annotations

from pocketmq.protocol.headers import RequestHeader, boolean, int64, text
from pocketmq.protocol.request_headers import NAME_MAX_CHARS


class BrokerAddrRequestHeader(RequestHeader):
    """BROKER_HEARTBEAT (RocketMQ 5's ``BrokerHeartbeatRequestHeader``; the name server reads these two)."""

    cluster_name: str = text("clusterName", max_chars=NAME_MAX_CHARS)
    broker_addr: str = text("brokerAddr", max_chars=NAME_MAX_CHARS)


class UnRegisterBrokerRequestHeader(BrokerAddrRequestHeader, first=("cluster_name", "broker_name")):
    """UNREGISTER_BROKER."""

    broker_name: str = text("brokerName", max_chars=NAME_MAX_CHARS)
    broker_id: int = int64("brokerId", low=0)


class RegisterBrokerRequestHeader(UnRegisterBrokerRequestHeader):
    """REGISTER_BROKER; ``bodyCrc32`` is CRC32 of the body (0 or absent: not checked)."""

    ha_server_addr: str = text("haServerAddr", "", max_chars=NAME_MAX_CHARS)
    compressed: bool = boolean("compressed")
    body_crc32: int = int64("bodyCrc32", 0)
    heartbeat_timeout_ms: int | None = int64("heartbeatTimeoutMillis", None)  # RocketMQ 5's


class GetRouteInfoRequestHeader(RequestHeader):
    """GET_ROUTEINFO_BY_TOPIC; ``autoCreate`` (PocketMQ's, false: an admin's look at a topic, which must not
    create it)."""

    topic: str = text("topic")
    auto_create: bool = boolean("autoCreate", True)


class GetTopicsByClusterRequestHeader(RequestHeader):
    cluster: str = text("cluster", max_chars=NAME_MAX_CHARS)


class DeleteTopicFromNamesrvRequestHeader(RequestHeader):
    """DELETE_TOPIC_IN_NAMESRV; without ``clusterName`` from every cluster."""

    topic: str = text("topic")
    cluster_name: str | None = text("clusterName", None, max_chars=NAME_MAX_CHARS)
