"""The name server's route table: the pure core (no I/O, no clock; every time is a ``now_ms`` argument).

State, as RocketMQ's ``RouteInfoManager``:

- live brokers by (cluster, remoting address): identity, PocketMQ flags, data version, when last heard from,
  their expiry, and the connection ("channel") they registered on;
- broker groups by broker name: the cluster and the address of each member by broker id (0 = master);
- clusters: the broker names of each;
- topics: the queue data of each broker group that serves them.

Registration is additive, as RocketMQ's default: a master's topic table updates the queue data of the topics
it lists (when its data version changed, or on its first registration; an incremental registration, which lists
only the topics that changed, always); topics it no longer lists stay until DELETE_TOPIC_IN_NAMESRV, unless
``delete_topic_with_broker_registration`` is set (applied to full registrations only). A broker address leaves on
unregistration, on expiry, or when the connection it registered on closes; a group left without members takes
its queue data out of every topic, and a topic left without queue data is gone.

Auto-creation is decided here (``auto_create_plan``: which masters to ask, with what config, by the broker's
own rule ``pocketmq.common.topic.auto_create_decision``) and recorded here (``record_created``); the shell
does the asking.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from pocketmq.common.topic import DEFAULT_TOPIC, TopicConfig, auto_create_decision
from pocketmq.protocol.route import (
    MASTER_ID,
    BrokerData,
    BrokerFlags,
    BrokerIdentity,
    ClusterInfo,
    QueueData,
    RegisterBrokerBody,
    TopicRouteData,
)

# Queue count of an auto-created topic on a broker that says nothing of it and has no TBW102 to copy from.
FALLBACK_TOPIC_QUEUE_NUMS = 8


@dataclass(slots=True)
class _LiveBroker:
    identity: BrokerIdentity
    flags: BrokerFlags
    data_version: dict
    last_update_ms: int
    timeout_ms: int
    channel: Hashable | None


@dataclass(slots=True)
class _BrokerGroup:
    cluster: str
    addrs: dict[int, str] = field(default_factory=dict)  # broker id -> remoting address


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What REGISTER_BROKER answers (RocketMQ's ``RegisterBrokerResponseHeader``: for a slave, its master), and
    whether the broker was unknown until now."""

    is_new: bool
    master_addr: str | None = None
    ha_server_addr: str | None = None


@dataclass(frozen=True, slots=True)
class TopicCreation:
    """Ask the master at ``master_addr`` of group ``broker_name`` to create ``config``."""

    broker_name: str
    master_addr: str
    config: TopicConfig


class RouteTable:
    def __init__(self, *, broker_expire_ms: int, delete_topic_with_broker_registration: bool = False):
        self._broker_expire_ms = broker_expire_ms
        self._delete_topic_with_registration = delete_topic_with_broker_registration
        self._live: dict[tuple[str, str], _LiveBroker] = {}
        self._groups: dict[str, _BrokerGroup] = {}
        self._clusters: dict[str, set[str]] = {}
        self._topics: dict[str, dict[str, QueueData]] = {}  # topic -> broker name -> queue data

    # -- brokers --------------------------------------------------------------------------------------------------
    def register(
        self, identity: BrokerIdentity, body: RegisterBrokerBody, *, now_ms: int, channel: Hashable | None = None
    ) -> RegisterResult:
        key = (identity.cluster, identity.broker_addr)
        previous = self._live.get(key)
        self._clusters.setdefault(identity.cluster, set()).add(identity.broker_name)
        group = self._groups.setdefault(identity.broker_name, _BrokerGroup(identity.cluster))
        group.cluster = identity.cluster
        # The same address under another id (a slave promoted to master): forget the old id first.
        for broker_id, addr in list(group.addrs.items()):
            if addr == identity.broker_addr and broker_id != identity.broker_id:
                del group.addrs[broker_id]
        group.addrs[identity.broker_id] = identity.broker_addr
        incremental = body.flags.incremental
        # An incremental body's version covers topics it does not list: the version kept stays the one of the
        # last full table, so the next full registration is applied whole if anything changed since.
        kept_version = (previous.data_version if previous is not None else {}) if incremental else body.data_version
        self._live[key] = _LiveBroker(
            identity,
            body.flags,
            dict(kept_version),
            now_ms,
            identity.heartbeat_timeout_ms or self._broker_expire_ms,
            channel,
        )
        # An empty data version (a peer that keeps none) counts as changed every time.
        changed = previous is None or not body.data_version or previous.data_version != body.data_version
        if identity.is_master and (changed or incremental) or self._speaks_for_its_group(identity, group):
            self._apply_topics(identity.broker_name, body.topics, whole_table=not incremental)
        if identity.is_master:
            return RegisterResult(previous is None)
        master_addr = group.addrs.get(MASTER_ID)
        master = self._live.get((identity.cluster, master_addr)) if master_addr else None
        return RegisterResult(previous is None, master_addr, master.identity.ha_server_addr if master else None)

    @staticmethod
    def _speaks_for_its_group(identity: BrokerIdentity, group: _BrokerGroup) -> bool:
        """A slave whose group has no master and which has the lowest id left (RocketMQ 5's "prime slave"): its
        topics make the group's queues, so a topic its master created but never registered before it died
        (a SYNC master acknowledges sends before its next registration) is readable through it. Applied at every
        registration: its table may have been the same since before the master went."""
        return not identity.is_master and MASTER_ID not in group.addrs and identity.broker_id == min(group.addrs)

    def _apply_topics(self, broker_name: str, topics: tuple[TopicConfig, ...], *, whole_table: bool) -> None:
        listed = {t.name for t in topics}
        if self._delete_topic_with_registration and whole_table:
            for topic in [t for t, queues in self._topics.items() if broker_name in queues and t not in listed]:
                self._drop_queues(topic, broker_name)
        for config in topics:
            self.record_created(config.name, broker_name, config)

    def heartbeat(self, cluster: str, broker_addr: str, *, now_ms: int) -> bool:
        """BROKER_HEARTBEAT: the broker is alive; False when it is not registered."""
        live = self._live.get((cluster, broker_addr))
        if live is None:
            return False
        live.last_update_ms = now_ms
        return True

    def unregister(self, cluster: str, broker_addr: str) -> BrokerIdentity | None:
        key = (cluster, broker_addr)
        return self._remove(key) if key in self._live else None

    def expire(self, now_ms: int) -> list[BrokerIdentity]:
        """Remove every broker not heard from within its timeout; returns them."""
        stale = [key for key, live in self._live.items() if now_ms - live.last_update_ms > live.timeout_ms]
        return [self._remove(key) for key in stale]

    def remove_channel(self, channel: Hashable) -> list[BrokerIdentity]:
        """The connection ``channel`` closed: remove the brokers whose latest registration came over it."""
        gone = [key for key, live in self._live.items() if live.channel is not None and live.channel == channel]
        return [self._remove(key) for key in gone]

    def _remove(self, key: tuple[str, str]) -> BrokerIdentity:
        identity = self._live.pop(key).identity
        group = self._groups.get(identity.broker_name)
        if group is not None:
            for broker_id, addr in list(group.addrs.items()):
                if addr == identity.broker_addr:
                    del group.addrs[broker_id]
            if not group.addrs:
                self._remove_group(identity.broker_name, group.cluster)
        return identity

    def _remove_group(self, broker_name: str, cluster: str) -> None:
        del self._groups[broker_name]
        names = self._clusters.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self._clusters[cluster]
        for topic in [t for t, queues in self._topics.items() if broker_name in queues]:
            self._drop_queues(topic, broker_name)

    def _drop_queues(self, topic: str, broker_name: str) -> None:
        queues = self._topics[topic]
        queues.pop(broker_name, None)
        if not queues:
            del self._topics[topic]

    # -- topics ---------------------------------------------------------------------------------------------------
    def record_created(self, topic: str, broker_name: str, config: TopicConfig) -> None:
        """Group ``broker_name`` serves ``topic`` as ``config`` says (ignored if the group is gone)."""
        if broker_name in self._groups:
            self._topics.setdefault(topic, {})[broker_name] = QueueData(
                broker_name,
                config.read_queue_nums,
                config.write_queue_nums,
                config.perm,
                gray_queue_ratio=config.gray_queue_ratio,  # clients split by it (docs/gray.md)
            )

    def route(self, topic: str) -> TopicRouteData | None:
        queues = self._topics.get(topic)
        if not queues:
            return None
        names = sorted(n for n in queues if n in self._groups)
        broker_datas = tuple(BrokerData(self._groups[n].cluster, n, dict(self._groups[n].addrs)) for n in names)
        addrs = {addr for b in broker_datas for addr in b.broker_addrs.values()}
        return TopicRouteData(tuple(queues[n] for n in names), broker_datas, self._grpc_addrs(addrs))

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Forget ``topic`` (only its queues on ``cluster``'s brokers when given); False if it was unknown."""
        queues = self._topics.get(topic)
        if queues is None:
            return False
        if cluster is None:
            del self._topics[topic]
            return True
        names = [n for n in queues if n in self._clusters.get(cluster, ())]
        for name in names:
            self._drop_queues(topic, name)
        return bool(names)

    def topics(self) -> list[str]:
        return sorted(self._topics)

    def topics_of_cluster(self, cluster: str) -> list[str]:
        names = self._clusters.get(cluster, set())
        return sorted(t for t, queues in self._topics.items() if names.intersection(queues))

    def cluster_info(self) -> ClusterInfo:
        brokers = {name: BrokerData(g.cluster, name, dict(g.addrs)) for name, g in self._groups.items()}
        clusters = {c: tuple(sorted(names)) for c, names in self._clusters.items()}
        return ClusterInfo(brokers, clusters, self._grpc_addrs({addr for _, addr in self._live}))

    def _grpc_addrs(self, remoting_addrs: set[str]) -> dict[str, str]:
        return {
            addr: live.flags.grpc_addr
            for (_, addr), live in sorted(self._live.items())
            if addr in remoting_addrs and live.flags.grpc_addr
        }

    # -- auto-creation --------------------------------------------------------------------------------------------
    def auto_create_plan(self, topic: str) -> list[TopicCreation]:
        """Which masters to ask to create unknown ``topic`` (by each broker's own auto-create rule); empty when
        the topic exists or none would.

        A broker that does not say whether it auto-creates (a RocketMQ broker) does when it has TBW102, as
        RocketMQ's brokers have TBW102 exactly when autoCreateTopicEnable is on.
        """
        if topic in self._topics:
            return []
        template = self._topics.get(DEFAULT_TOPIC, {})
        plan = []
        for name, group in sorted(self._groups.items()):
            master_addr = group.addrs.get(MASTER_ID)
            live = self._live.get((group.cluster, master_addr)) if master_addr else None
            if master_addr is None or live is None:
                continue
            enabled = live.flags.auto_create_topic_enable
            if enabled is None:
                enabled = name in template
            queue_nums = live.flags.default_topic_queue_nums or (
                template[name].write_queue_nums if name in template else FALLBACK_TOPIC_QUEUE_NUMS
            )
            config = auto_create_decision(topic, auto_create_enabled=enabled, default_queue_nums=queue_nums)
            if config is not None:
                plan.append(TopicCreation(name, master_addr, config))
        return plan

    def __repr__(self) -> str:
        return (
            f"<RouteTable clusters={sorted(self._clusters)} groups={sorted(self._groups)} "
            f"brokers={len(self._live)} topics={len(self._topics)}>"
        )
