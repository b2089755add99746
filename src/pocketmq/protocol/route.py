"""RocketMQ's route and registration JSON bodies, as dataclasses with ``to_json`` / ``from_json``.

Field names are RocketMQ's (remoting module ``TopicRouteData``, ``QueueData``, ``BrokerData``, ``ClusterInfo``,
``RegisterBrokerBody``, ``TopicConfigSerializeWrapper``, ``TopicList``; docs/namesrv.md lists them).

Decoding is lenient, because the peers are: RocketMQ serializes with fastjson, which writes integer map keys
unquoted (``"brokerAddrs":{0:"10.0.0.1:10911"}``, not valid JSON); numbers may arrive as strings and booleans as
``"true"``. Encoding is strict JSON with quoted keys. Unknown fields are ignored on the way in.

PocketMQ additions travel as extra fields that 4.x peers ignore: ``"pocketmq"`` in a registration body (the
broker's gRPC endpoint and auto-create flags), ``"grpcAddrTable"`` (remoting address -> gRPC address) in a
route and in cluster info, and a queue data's ``"attributes"`` (the topic's gray ratio on that broker).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from pocketmq.common.gray import GRAY_RATIO_ATTRIBUTE, parse_gray_ratio
from pocketmq.common.topic import DEFAULT_TOPIC, PERM_READ_WRITE, MessageType, TopicConfig
from pocketmq.protocol.namesrv_headers import RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader

MASTER_ID = 0
_MESSAGE_TYPE_ATTRIBUTE = "message.type"  # RocketMQ 5's topic attribute (sent as "+message.type" on create)


class RouteFormatError(ValueError):
    """A route or registration body that is not what RocketMQ's JSON for it looks like."""


# -- lenient JSON ------------------------------------------------------------------------------------------------
# An unquoted integer key right after "{" or ",": fastjson's form of a Map<Long|Integer, ...> key.
_BARE_INT_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")
_STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')


def loads_lenient(data: bytes | str) -> Any:
    """Parse JSON, also accepting fastjson's unquoted integer map keys."""
    text = data.decode("utf-8", errors="strict") if isinstance(data, (bytes, bytearray, memoryview)) else data
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(_quote_bare_int_keys(text))
    except ValueError as exc:
        raise RouteFormatError(f"body is not JSON: {exc}") from None


def _quote_bare_int_keys(text: str) -> str:
    # Quote keys only outside string literals: split the text into literals and the code between them.
    parts, pos = [], 0
    for literal in _STRING_LITERAL.finditer(text):
        parts.append(_BARE_INT_KEY.sub(r'\1"\2"\3', text[pos : literal.start()]))
        parts.append(literal.group())
        pos = literal.end()
    parts.append(_BARE_INT_KEY.sub(r'\1"\2"\3', text[pos:]))
    return "".join(parts)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def as_int(value: Any, name: str, default: int | None = None) -> int:
    """An integer from a JSON number or a numeric string."""
    if value is None or value == "":
        if default is None:
            raise RouteFormatError(f"{name} is missing")
        return default
    if isinstance(value, bool):
        raise RouteFormatError(f"{name}={value!r} is not an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise RouteFormatError(f"{name}={value!r} is not an integer") from None


def as_bool(value: Any, default: bool = False) -> bool:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "1")


def _as_dict(value: Any, name: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RouteFormatError(f"{name} is not an object")
    return value


def _as_list(value: Any, name: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RouteFormatError(f"{name} is not a list")
    return value


def _as_str(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise RouteFormatError(f"{name} is missing or not a string")
    return value


def _load_object(data: bytes | str | dict, what: str) -> dict:
    obj = data if isinstance(data, dict) else loads_lenient(data)
    if not isinstance(obj, dict):
        raise RouteFormatError(f"{what} is not a JSON object")
    return obj


# -- route -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker group's queues of a topic.

    ``gray_queue_ratio`` (PocketMQ) is the topic's attribute ``gray.queue.ratio`` on that broker, so that
    clients split by it (docs/gray.md); it travels as ``"attributes": {"gray.queue.ratio": "0.25"}``, which
    RocketMQ's clients ignore, and only when the topic has one."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ_WRITE
    topic_sys_flag: int = 0
    gray_queue_ratio: float | None = None

    def to_obj(self) -> dict:
        obj: dict[str, Any] = {
            "brokerName": self.broker_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicSysFlag": self.topic_sys_flag,
        }
        if self.gray_queue_ratio is not None:
            obj["attributes"] = {GRAY_RATIO_ATTRIBUTE: f"{self.gray_queue_ratio:g}"}
        return obj

    @classmethod
    def from_obj(cls, obj: Any) -> QueueData:
        obj = _as_dict(obj, "queueData")
        # "topicSynFlag" is the field's name in RocketMQ 3.x/early 4.x.
        sys_flag = obj.get("topicSysFlag", obj.get("topicSynFlag"))
        try:
            gray_queue_ratio = topic_gray_ratio(_as_dict(obj.get("attributes"), "queueData.attributes"))
        except ValueError:
            gray_queue_ratio = None  # not a ratio (written by something else): clients do not split by it
        return cls(
            _as_str(obj.get("brokerName"), "queueData.brokerName"),
            as_int(obj.get("readQueueNums"), "readQueueNums"),
            as_int(obj.get("writeQueueNums"), "writeQueueNums"),
            as_int(obj.get("perm"), "perm", PERM_READ_WRITE),
            as_int(sys_flag, "topicSysFlag", 0),
            gray_queue_ratio,
        )


@dataclass(frozen=True, slots=True)
class BrokerData:
    """A broker group: its cluster, name, and the address of each member by broker id (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def to_obj(self) -> dict:
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerAddrs": {str(bid): addr for bid, addr in sorted(self.broker_addrs.items())},
        }

    @classmethod
    def from_obj(cls, obj: Any) -> BrokerData:
        obj = _as_dict(obj, "brokerData")
        addrs = {
            as_int(k, "brokerAddrs key"): _as_str(v, "broker address")
            for k, v in _as_dict(obj.get("brokerAddrs"), "brokerAddrs").items()
        }
        return cls(str(obj.get("cluster") or ""), _as_str(obj.get("brokerName"), "brokerData.brokerName"), addrs)


def _grpc_table_from_obj(obj: dict) -> dict[str, str]:
    return {str(k): str(v) for k, v in _as_dict(obj.get("grpcAddrTable"), "grpcAddrTable").items() if v}


def _with_grpc_table(obj: dict[str, Any], grpc_addrs: dict[str, str]) -> dict[str, Any]:
    """``obj`` with PocketMQ's ``grpcAddrTable`` when there is one (RocketMQ's clients ignore the field)."""
    if grpc_addrs:
        obj["grpcAddrTable"] = dict(grpc_addrs)
    return obj


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """Where a topic lives: queue data per broker group, and the groups' addresses.

    ``grpc_addrs`` (PocketMQ) maps a broker's remoting address to its gRPC endpoint, so any broker's gRPC
    front end can route clients to every broker's gRPC port. ``order_topic_conf`` is only kept when decoding
    another name server's answer: PocketMQ never sends it (4.x clients let it replace queueDatas).
    """

    queue_datas: tuple[QueueData, ...] = ()
    broker_datas: tuple[BrokerData, ...] = ()
    grpc_addrs: dict[str, str] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_obj(self) -> dict:
        obj: dict[str, Any] = {
            "queueDatas": [q.to_obj() for q in self.queue_datas],
            "brokerDatas": [b.to_obj() for b in self.broker_datas],
            "filterServerTable": {},
        }
        if self.order_topic_conf:
            obj["orderTopicConf"] = self.order_topic_conf
        return _with_grpc_table(obj, self.grpc_addrs)

    def to_json(self) -> bytes:
        return dumps(self.to_obj())

    @classmethod
    def from_json(cls, data: bytes | str | dict) -> TopicRouteData:
        obj = _load_object(data, "route")
        return cls(
            tuple(QueueData.from_obj(q) for q in _as_list(obj.get("queueDatas"), "queueDatas")),
            tuple(BrokerData.from_obj(b) for b in _as_list(obj.get("brokerDatas"), "brokerDatas")),
            _grpc_table_from_obj(obj),
            obj.get("orderTopicConf") or None,
        )

    def broker(self, broker_name: str) -> BrokerData | None:
        return next((b for b in self.broker_datas if b.broker_name == broker_name), None)

    def __repr__(self) -> str:
        return (
            f"<TopicRouteData brokers={[b.broker_name for b in self.broker_datas]} "
            f"queues={[(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in self.queue_datas]}>"
        )


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Every broker group by name, and the group names of each cluster."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, tuple[str, ...]] = field(default_factory=dict)
    grpc_addrs: dict[str, str] = field(default_factory=dict)

    def to_obj(self) -> dict:
        obj: dict[str, Any] = {
            "brokerAddrTable": {name: b.to_obj() for name, b in sorted(self.broker_addr_table.items())},
            "clusterAddrTable": {c: sorted(names) for c, names in sorted(self.cluster_addr_table.items())},
        }
        return _with_grpc_table(obj, self.grpc_addrs)

    def to_json(self) -> bytes:
        return dumps(self.to_obj())

    @classmethod
    def from_json(cls, data: bytes | str | dict) -> ClusterInfo:
        obj = _load_object(data, "cluster info")
        brokers = {
            str(name): BrokerData.from_obj(b)
            for name, b in _as_dict(obj.get("brokerAddrTable"), "brokerAddrTable").items()
        }
        clusters = {
            str(c): tuple(str(n) for n in _as_list(names, "clusterAddrTable entry"))
            for c, names in _as_dict(obj.get("clusterAddrTable"), "clusterAddrTable").items()
        }
        return cls(brokers, clusters, _grpc_table_from_obj(obj))

    def addrs_of_cluster(self, cluster: str) -> list[str]:
        """Every member address of every group in ``cluster``."""
        return [
            addr
            for name in self.cluster_addr_table.get(cluster, ())
            if name in self.broker_addr_table
            for _, addr in sorted(self.broker_addr_table[name].broker_addrs.items())
        ]


def topic_list_json(topics: list[str]) -> bytes:
    """RocketMQ's ``TopicList`` body."""
    return dumps({"topicList": sorted(topics)})


def topic_list_from_json(data: bytes | str) -> list[str]:
    obj = _load_object(data, "topic list")
    return [str(t) for t in _as_list(obj.get("topicList"), "topicList")]


# -- registration --------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """Who registers: the fields of RocketMQ's ``RegisterBrokerRequestHeader`` (``UnRegisterBrokerRequestHeader``
    and ``BrokerHeartbeatRequestHeader`` carry a subset).

    ``heartbeat_timeout_ms`` (RocketMQ 5's ``heartbeatTimeoutMillis``) None leaves the expiry to the name server.
    """

    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str = ""
    heartbeat_timeout_ms: int | None = None

    @property
    def is_master(self) -> bool:
        return self.broker_id == MASTER_ID

    def unregister_fields(self) -> dict[str, str]:
        return UnRegisterBrokerRequestHeader.ext_fields(
            cluster_name=self.cluster,
            broker_name=self.broker_name,
            broker_addr=self.broker_addr,
            broker_id=self.broker_id,
        )

    def register_fields(self, body_crc32: int) -> dict[str, str]:
        """REGISTER_BROKER's header; ``body_crc32`` is the CRC32 (zlib's, Java's CRC32) of the JSON body."""
        return RegisterBrokerRequestHeader.ext_fields(
            cluster_name=self.cluster,
            broker_name=self.broker_name,
            broker_addr=self.broker_addr,
            broker_id=self.broker_id,
            ha_server_addr=self.ha_server_addr,
            compressed=False,
            body_crc32=body_crc32,
            heartbeat_timeout_ms=self.heartbeat_timeout_ms,
        )


def create_topic_fields(config: TopicConfig, *, auto_create: bool = False) -> dict:
    """UPDATE_AND_CREATE_TOPIC's header for ``config`` (RocketMQ's ``CreateTopicRequestHeader``).

    The message type travels twice: as RocketMQ 5's attribute string ``+message.type=MIXED`` (what RocketMQ 5
    brokers read) and as PocketMQ's plain ``messageType`` (which a PocketMQ broker prefers). With ``auto_create``
    (PocketMQ's ``autoCreate=true``, what the name server sends on a route lookup) a PocketMQ broker applies its
    own auto-create rule instead and never changes an existing topic; RocketMQ brokers ignore the field.
    A gray ratio travels as ``+gray.queue.ratio=R``; a config without one sends none, and the broker keeps the
    ratio it has (RocketMQ's rule for attributes an update does not mention).
    """
    fields: dict[str, Any] = {
        "topic": config.name,
        "defaultTopic": DEFAULT_TOPIC,
        "readQueueNums": config.read_queue_nums,
        "writeQueueNums": config.write_queue_nums,
        "perm": config.perm,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": config.order,
        "attributes": _attributes_text(topic_attributes(config)),
        "messageType": config.message_type.value,
    }
    if auto_create:
        fields["autoCreate"] = True
    return fields


def update_topic_fields(
    topic: str,
    *,
    queues: int | None = None,
    perm: int | None = None,
    order: bool | None = None,
    message_type: MessageType | None = None,
    gray_queue_ratio: float | None = None,
) -> dict:
    """UPDATE_AND_CREATE_TOPIC's header naming only the options given (None: left out), for a PocketMQ broker,
    which keeps a topic's value of every field a request leaves out (``queues`` sets read and write queues)."""
    fields: dict[str, Any] = {"topic": topic}
    for name, value in (("readQueueNums", queues), ("writeQueueNums", queues), ("perm", perm), ("order", order)):
        if value is not None:
            fields[name] = value
    attributes = {}
    if message_type is not None:
        fields["messageType"] = attributes[_MESSAGE_TYPE_ATTRIBUTE] = message_type.value
    if gray_queue_ratio is not None:
        attributes[GRAY_RATIO_ATTRIBUTE] = f"{gray_queue_ratio:g}"
    if attributes:
        fields["attributes"] = _attributes_text(attributes)
    return fields


def _attributes_text(attributes: dict[str, str]) -> str:
    """RocketMQ 5's attribute string: ``+key=value`` joined by commas."""
    return ",".join(f"+{key}={value}" for key, value in attributes.items())


def topic_attributes(config: TopicConfig) -> dict[str, str]:
    """RocketMQ 5's topic attributes of ``config``: its message type, and its gray ratio when it has one."""
    attributes = {_MESSAGE_TYPE_ATTRIBUTE: config.message_type.value}
    if config.gray_queue_ratio is not None:
        attributes[GRAY_RATIO_ATTRIBUTE] = f"{config.gray_queue_ratio:g}"
    return attributes


def topic_gray_ratio(attributes: dict) -> float | None:
    """A topic's ``gray.queue.ratio`` attribute; None when absent. ValueError when it is not a ratio."""
    raw = str(attributes.get(GRAY_RATIO_ATTRIBUTE) or "").strip()
    return parse_gray_ratio(raw) if raw else None


def topic_config_to_obj(config: TopicConfig) -> dict:
    """A ``TopicConfig`` in RocketMQ's JSON form (``topicConfigTable`` values)."""
    return {
        "topicName": config.name,
        "readQueueNums": config.read_queue_nums,
        "writeQueueNums": config.write_queue_nums,
        "perm": config.perm,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": config.order,
        "attributes": topic_attributes(config),
    }


def topic_config_from_obj(name: str, obj: Any) -> TopicConfig:
    obj = _as_dict(obj, f"topicConfigTable[{name}]")
    attributes = {str(k).lstrip("+-"): v for k, v in _as_dict(obj.get("attributes"), "attributes").items()}
    raw_type = attributes.get(_MESSAGE_TYPE_ATTRIBUTE)
    try:
        message_type = MessageType.parse(str(raw_type)) if raw_type else MessageType.MIXED
    except ValueError:
        message_type = MessageType.MIXED  # a type PocketMQ does not know: accept everything, as untyped
    try:
        gray_queue_ratio = topic_gray_ratio(attributes)
    except ValueError:
        gray_queue_ratio = None  # not a ratio (written by something else): the topic is not split
    return TopicConfig(
        str(obj.get("topicName") or name),
        as_int(obj.get("readQueueNums"), "readQueueNums"),
        as_int(obj.get("writeQueueNums"), "writeQueueNums"),
        as_int(obj.get("perm"), "perm", PERM_READ_WRITE),
        message_type,
        as_bool(obj.get("order")),
        gray_queue_ratio,
    )


# REGISTER_BROKER's reply to an incremental registration from a broker the name server did not know (it restarted,
# or expired the broker): send every topic now (PocketMQ's; a broker that does not read it registers every topic
# at its next full round anyway)
WHOLE_TABLE_NEEDED = "pmqWholeTableNeeded"
# An incremental body's dataVersion has this stateVersion, which a full one never has: a name server that does not
# read the incremental flag (and so may take the body for the whole table) applies the next full one whole
INCREMENTAL_STATE_VERSION = 1


@dataclass(frozen=True, slots=True)
class BrokerFlags:
    """What a PocketMQ broker tells the name server beyond RocketMQ's registration (the ``"pocketmq"`` field).

    ``auto_create_topic_enable`` None means "not said" (a RocketMQ broker): the name server then infers it
    from TBW102 being in the broker's topic table. ``incremental``: the body lists only the topics that changed
    (cluster.registrar), so the name server adds them and takes nothing away.
    """

    grpc_addr: str | None = None
    auto_create_topic_enable: bool | None = None
    default_topic_queue_nums: int | None = None
    incremental: bool = False

    def to_obj(self) -> dict:
        obj: dict[str, Any] = {"grpcAddr": self.grpc_addr}
        if self.auto_create_topic_enable is not None:
            obj["autoCreateTopicEnable"] = self.auto_create_topic_enable
        if self.default_topic_queue_nums is not None:
            obj["defaultTopicQueueNums"] = self.default_topic_queue_nums
        if self.incremental:
            obj["incremental"] = True
        return obj

    @classmethod
    def from_obj(cls, obj: Any) -> BrokerFlags:
        obj = _as_dict(obj, "pocketmq")
        auto = obj.get("autoCreateTopicEnable")
        nums = obj.get("defaultTopicQueueNums")
        return cls(
            str(obj["grpcAddr"]) if obj.get("grpcAddr") else None,
            None if auto is None else as_bool(auto),
            None if nums is None else as_int(nums, "defaultTopicQueueNums"),
            as_bool(obj.get("incremental")),
        )


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """The REGISTER_BROKER body: the broker's topic table (``topicConfigSerializeWrapper``) and its data version.

    ``data_version`` is RocketMQ's ``DataVersion`` ({timestamp, counter, stateVersion}), kept as sent.
    """

    topics: tuple[TopicConfig, ...] = ()
    data_version: dict = field(default_factory=dict)
    flags: BrokerFlags = BrokerFlags()

    def to_obj(self) -> dict:
        return {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": {t.name: topic_config_to_obj(t) for t in self.topics},
                "dataVersion": dict(self.data_version),
            },
            "filterServerList": [],
            "pocketmq": self.flags.to_obj(),
        }

    def to_json(self) -> bytes:
        return dumps(self.to_obj())

    def as_incremental(self) -> RegisterBrokerBody:
        """This body as one that lists only changed topics (``BrokerFlags.incremental``)."""
        version = {**self.data_version, "stateVersion": INCREMENTAL_STATE_VERSION}
        return replace(self, data_version=version, flags=replace(self.flags, incremental=True))

    @classmethod
    def from_json(cls, data: bytes | str | dict) -> RegisterBrokerBody:
        obj = _load_object(data, "registration body")
        wrapper = _as_dict(obj.get("topicConfigSerializeWrapper"), "topicConfigSerializeWrapper")
        table = _as_dict(wrapper.get("topicConfigTable"), "topicConfigTable")
        topics = tuple(topic_config_from_obj(str(name), cfg) for name, cfg in table.items())
        return cls(
            topics, _as_dict(wrapper.get("dataVersion"), "dataVersion"), BrokerFlags.from_obj(obj.get("pocketmq"))
        )
