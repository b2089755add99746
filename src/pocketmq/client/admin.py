"""Administration: ``AsyncAdmin`` (asyncio core) and ``Admin`` (synchronous facade).

Topics and subscription groups are created on every master broker of a cluster (the clusters and brokers
come from the name server's cluster info), as RocketMQ's ``mqadmin updateTopic -c``. Reads (describe, stats)
ask each broker of the topic's route.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pocketmq.client.config import ClientConfig
from pocketmq.client.instance import ClientInstance, InstanceUser
from pocketmq.client.loop_thread import SyncFacade
from pocketmq.client.replies import check_topic, json_body, offset_of
from pocketmq.client.route_view import MASTER_ID
from pocketmq.common.errors import BadRequestError, ClientError, SubscriptionGroupNotExistError, TopicNotExistError
from pocketmq.common.message import MessageQueue
from pocketmq.common.namespace import Namespace
from pocketmq.common.topic import PERM_READ_WRITE, MessageType, TopicConfig, group_name_problem
from pocketmq.protocol.codes import GET_GROUP_GRAY_CLIENTS, GET_TRANSACTION_STATUS, RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.namesrv_headers import DeleteTopicFromNamesrvRequestHeader
from pocketmq.protocol.properties_text import parse_properties_text, properties_text
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import (
    GetConsumeStatsRequestHeader,
    GetTransactionStatusRequestHeader,
    GroupRequestHeader,
    QueueRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
    TopicRequestHeader,
)
from pocketmq.protocol.route import (
    ClusterInfo,
    TopicRouteData,
    create_topic_fields,
    topic_config_from_obj,
    update_topic_fields,
)

log = logging.getLogger(__name__)

MAX_QUEUE_NUMS = 1024
ROUTE_WAIT_S = 5.0
ROUTE_POLL_INTERVAL_S = 0.05
# How far a topic create or update is: (brokers whose route shows it, brokers)
TopicProgress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    broker_name: str
    broker_id: int  # 0: the master
    addr: str


@dataclass(frozen=True, slots=True)
class QueueStatus:
    queue: MessageQueue
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class TopicStatus:
    topic: str
    queues: list[QueueStatus]
    write_queue_count: int
    read_queue_count: int

    @property
    def message_count(self) -> int:
        """Messages still stored: the sum of max - min over the queues."""
        return sum(q.max_offset - q.min_offset for q in self.queues)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A subscription group as RocketMQ's SubscriptionGroupConfig names it (the fields PocketMQ uses)."""

    group: str
    consume_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    extra: dict = field(default_factory=dict)  # any other field the broker returned

    def to_json(self) -> dict:
        return {
            **self.extra,
            "groupName": self.group,
            "consumeEnable": self.consume_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "consumeFromMinEnable": True,
            "notifyConsumerIdsChangedEnable": True,
            "brokerId": 0,
            "whichBrokerWhenConsumeSlowly": 1,
        }

    @classmethod
    def from_json(cls, obj: dict) -> GroupConfig:
        known = {
            "groupName",
            "consumeEnable",
            "consumeBroadcastEnable",
            "consumeMessageOrderly",
            "retryQueueNums",
            "retryMaxTimes",
        }
        return cls(
            group=str(obj["groupName"]),
            consume_enable=bool(obj.get("consumeEnable", True)),
            consume_broadcast_enable=bool(obj.get("consumeBroadcastEnable", True)),
            consume_message_orderly=bool(obj.get("consumeMessageOrderly", False)),
            retry_queue_nums=int(obj.get("retryQueueNums", 1)),
            retry_max_times=int(obj.get("retryMaxTimes", 16)),
            extra={k: v for k, v in obj.items() if k not in known},
        )


def _check_queues(queues: int) -> None:
    if not 1 <= queues <= MAX_QUEUE_NUMS:
        raise BadRequestError(f"queue count must be in [1, {MAX_QUEUE_NUMS}], got {queues}")


def _check_gray_ratio(gray_queue_ratio: float | None) -> None:
    if gray_queue_ratio is not None and not 0.0 <= gray_queue_ratio <= 1.0:
        raise BadRequestError(f"gray queue ratio must be in [0, 1], got {gray_queue_ratio}")


def _intent_fields(*, create_only: bool = False, update_only: bool = False, force: bool = False) -> dict:
    """PocketMQ's UPDATE_AND_CREATE_TOPIC fields (docs/protocol.md) that say what the request may do: create
    only, update only, and hide stored messages by dropping read queues."""
    intent = {"createOnly": create_only, "updateOnly": update_only, "force": force}
    return {name: True for name, wanted in intent.items() if wanted}


def brokers_showing_queues(route: TopicRouteData, brokers: list[str], queues: int) -> list[str]:
    """Those of ``brokers`` that ``route`` lists with ``queues`` read and write queues."""
    by_broker = {qd.broker_name: qd for qd in route.queue_datas}
    return [
        name
        for name in brokers
        if name in by_broker
        and by_broker[name].read_queue_nums == queues
        and by_broker[name].write_queue_nums == queues
    ]


class AsyncAdmin(InstanceUser):
    """Administration of topics, groups and brokers. With a ``namespace`` in its config, the topics and groups it
    names, creates and lists are those of the namespace, by the names its users know."""

    _kind = "admin client"

    def __init__(self, config: ClientConfig | None = None, *, instance: ClientInstance | None = None):
        super().__init__(config, instance=instance)
        self.namespace = Namespace(self.config.namespace)

    # -- cluster --------------------------------------------------------------------------------------------------
    async def cluster_info(self) -> ClusterInfo:
        response = await self.instance.invoke_namesrv(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        expect_success(response)
        return ClusterInfo.from_json(response.body)

    async def master_addrs(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name -> master address, of ``cluster`` or of every cluster."""
        info = await self.cluster_info()
        if cluster is not None and cluster not in info.cluster_addr_table:
            raise BadRequestError(
                f"cluster {cluster!r} is unknown to the name server "
                f"(known: {', '.join(sorted(info.cluster_addr_table)) or 'none'})"
            )
        names = info.cluster_addr_table[cluster] if cluster is not None else list(info.broker_addr_table)
        masters = {}
        for name in names:
            broker = info.broker_addr_table.get(name)
            addr = broker.broker_addrs.get(MASTER_ID) if broker else None
            if addr:
                masters[name] = addr
        if not masters:
            raise ClientError(f"no master broker is registered with the name server {self.config.namesrv_addr}")
        return masters

    async def _on_masters(self, request_factory, cluster: str | None) -> dict[str, RemotingCommand]:
        masters = await self.master_addrs(cluster)
        names = sorted(masters)
        responses = await asyncio.gather(
            *(
                self.instance.remoting.invoke(masters[n], request_factory(), self.config.request_timeout_s)
                for n in names
            )
        )
        return dict(zip(names, responses))

    # -- topics ---------------------------------------------------------------------------------------------------
    async def create_topic(
        self,
        topic: str,
        *,
        queues: int = 8,
        message_type: MessageType = MessageType.MIXED,
        perm: int = PERM_READ_WRITE,
        cluster: str | None = None,
        order: bool = False,
        gray_queue_ratio: float | None = None,
        update: bool = False,
        force: bool = False,
        route_wait_s: float = ROUTE_WAIT_S,
        progress: TopicProgress | None = None,
    ) -> list[str]:
        """Create ``topic`` on every master of ``cluster`` (every cluster when None); returns the broker names.
        ``gray_queue_ratio`` sets the topic attribute ``gray.queue.ratio`` (docs/gray.md).

        A master that already has the topic refuses and keeps it as it is (RemoteServerError naming it; the
        others create it), unless ``update``: then an existing topic takes this definition (RocketMQ's
        create-or-update; None for the gray ratio keeps the topic's). Fewer read queues than a topic has, where
        the queues dropped still store messages, are refused unless ``force`` (those messages would be hidden).

        Brokers tell the name server about a topic change by re-registering, a moment later; this waits up to
        ``route_wait_s`` until the name server's route shows ``queues`` on every one of them, so a send made
        right after gets the new queues. ``progress(done, brokers)`` is called as the route shows them.
        """
        check_topic(topic)
        _check_queues(queues)
        _check_gray_ratio(gray_queue_ratio)
        if force and not update:
            raise BadRequestError("force applies to an existing topic: use it with update")
        topic = self.namespace.wrap(topic)
        fields = create_topic_fields(TopicConfig(topic, queues, queues, perm, message_type, order, gray_queue_ratio))
        fields.update(_intent_fields(create_only=not update, force=force))
        brokers = await self._topic_request(fields, cluster)
        await self._wait_for_route(topic, brokers, queues, route_wait_s, progress)
        return brokers

    async def update_topic(
        self,
        topic: str,
        *,
        queues: int | None = None,
        message_type: MessageType | None = None,
        perm: int | None = None,
        order: bool | None = None,
        gray_queue_ratio: float | None = None,
        cluster: str | None = None,
        force: bool = False,
        route_wait_s: float = ROUTE_WAIT_S,
        progress: TopicProgress | None = None,
    ) -> list[str]:
        """Change the options given (None: keep) of an existing ``topic`` on every master of ``cluster``;
        returns the broker names. A master without the topic refuses (TOPIC_NOT_EXIST): create it first. Fewer
        read queues where the queues dropped still store messages are refused unless ``force``. With ``queues``,
        waits for the route (and calls ``progress``) as ``create_topic`` does."""
        check_topic(topic)
        if queues is not None:
            _check_queues(queues)
        _check_gray_ratio(gray_queue_ratio)
        topic = self.namespace.wrap(topic)
        fields = update_topic_fields(
            topic, queues=queues, perm=perm, order=order, message_type=message_type, gray_queue_ratio=gray_queue_ratio
        )
        if fields.keys() == {"topic"}:
            raise BadRequestError(f"nothing to update for topic {topic!r}: name at least one option to change")
        fields.update(_intent_fields(update_only=True, force=force))
        brokers = await self._topic_request(fields, cluster)
        if queues is not None:
            await self._wait_for_route(topic, brokers, queues, route_wait_s, progress)
        return brokers

    async def _topic_request(self, fields: dict, cluster: str | None) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC with ``fields`` on every master; RemoteServerError naming each broker that
        refused (and those that did it) when any did."""
        responses = await self._on_masters(
            lambda: RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), cluster
        )
        refused = {name: r for name, r in sorted(responses.items()) if r.code != ResponseCode.SUCCESS}
        if refused:
            done = sorted(set(responses) - set(refused))
            remarks = "; ".join(r.remark or f"refused by {name}" for name, r in refused.items())
            raise RemoteServerError(
                next(iter(refused.values())).code, remarks + (f" (done on {', '.join(done)})" if done else "")
            )
        return sorted(responses)

    async def _wait_for_route(
        self, topic: str, brokers: list[str], queues: int, wait_s: float, progress: TopicProgress | None
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            try:
                # not auto-created by the look: the name server would create it on masters the create left out
                route = await self.instance.fetch_route_data(topic, auto_create=False)
                shown = len(brokers_showing_queues(route, brokers, queues))
                if progress is not None:
                    progress(shown, len(brokers))
                if shown == len(brokers):
                    await self.instance.route(topic, refresh=True, auto_create=False)  # this process's cache too
                    return
            except (TopicNotExistError, RemoteServerError):
                pass  # not registered yet
            if loop.time() >= deadline:
                log.warning("event=route_not_updated topic=%s brokers=%s wait_s=%.1f", topic, brokers, wait_s)
                return
            await asyncio.sleep(ROUTE_POLL_INTERVAL_S)

    async def on_topic_brokers(self, topic: str, code: int, fields: dict[str, str]) -> dict[str, RemotingCommand]:
        """Request ``code`` with ``fields`` to every broker of ``topic``'s route (a fresh one; TopicNotExistError
        for a topic without one): broker name -> its answer."""
        check_topic(topic)
        route = await self.instance.route(self.namespace.wrap(topic), refresh=True, auto_create=False)
        names = sorted(route.broker_names)
        responses = await asyncio.gather(
            *(self.instance.invoke_broker(name, RemotingCommand.request(code, fields)) for name in names)
        )
        return dict(zip(names, responses))

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        """Delete ``topic`` from every master of the cluster, then from the name server."""
        check_topic(topic)
        topic = self.namespace.wrap(topic)
        responses = await self._on_masters(
            lambda: RemotingCommand.request(
                RequestCode.DELETE_TOPIC_IN_BROKER, TopicRequestHeader.ext_fields(topic=topic)
            ),
            cluster,
        )
        for response in responses.values():
            expect_success(response)
        fields = DeleteTopicFromNamesrvRequestHeader.ext_fields(topic=topic, cluster_name=cluster)
        expect_success(
            await self.instance.invoke_namesrv(RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, fields))
        )
        return sorted(responses)

    async def list_topics(self) -> list[str]:
        response = await self.instance.invoke_namesrv(
            RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        )
        expect_success(response)
        return self._own_names(json_body(response).get("topicList", []))

    def _own_names(self, names) -> list[str]:
        """The names of this admin's namespace among the broker's ``names`` (all of them without one), as its
        users know them."""
        if not self.namespace.name:
            return sorted(names)
        return sorted(self.namespace.unwrap(n) for n in names if self.namespace.unwrap(n) != n)

    async def describe_topic(self, topic: str) -> TopicStatus:
        """Per queue min and max offsets, from each broker of the topic's route; TopicNotExistError for a topic
        without one (never created by this look)."""
        check_topic(topic)
        route = await self.instance.route(self.namespace.wrap(topic), refresh=True, auto_create=False)

        async def status(mq: MessageQueue) -> QueueStatus:
            fields = QueueRequestHeader.ext_fields(topic=mq.topic, queue_id=mq.queue_id)
            min_r, max_r = await asyncio.gather(
                self.instance.invoke_broker(
                    mq.broker_name, RemotingCommand.request(RequestCode.GET_MIN_OFFSET, fields)
                ),
                self.instance.invoke_broker(
                    mq.broker_name, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, fields)
                ),
            )
            return QueueStatus(self.namespace.unwrap_queue(mq), offset_of(min_r), offset_of(max_r))

        queues = sorted(set(route.read_queues) | set(route.write_queues))
        statuses = await asyncio.gather(*(status(mq) for mq in queues))
        return TopicStatus(topic, list(statuses), len(route.write_queues), len(route.read_queues))

    async def topic_configs(self, *, cluster: str | None = None) -> dict[str, dict[str, TopicConfig]]:
        """GET_ALL_TOPIC_CONFIG of every master: broker name -> topic -> its config there (the topics of this
        admin's namespace, by their short names). One request per master, however many topics."""
        answers = await self._json_from_masters(RequestCode.GET_ALL_TOPIC_CONFIG, {}, cluster)
        result: dict[str, dict[str, TopicConfig]] = {}
        for broker_name, answer in answers.items():
            table = answer.get("topicConfigTable") or {}
            wrap = self.namespace.wrap
            result[broker_name] = {
                name: topic_config_from_obj(name, table[wrap(name)]) for name in self._own_names(table)
            }
        return result

    # -- subscription groups ----------------------------------------------------------------------------------------
    async def create_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        retry_max_times: int = 16,
        retry_queue_nums: int = 1,
        consume_message_orderly: bool = False,
        attributes: dict[str, str] | None = None,
    ) -> list[str]:
        """``attributes``: RocketMQ 5's group attributes, e.g. the gray rule ``gray.clients`` /
        ``gray.queue.ratio`` (docs/gray.md)."""
        problem = group_name_problem(group)
        if problem:
            raise BadRequestError(problem)
        group = self.namespace.wrap(group)
        extra = {"attributes": dict(attributes)} if attributes else {}
        body = json.dumps(
            GroupConfig(
                group,
                retry_max_times=retry_max_times,
                retry_queue_nums=retry_queue_nums,
                extra=extra,
                consume_message_orderly=consume_message_orderly,
            ).to_json()
        ).encode()
        responses = await self._on_masters(
            lambda: RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body), cluster
        )
        for response in responses.values():
            expect_success(response)
        return sorted(responses)

    async def list_groups(self, *, cluster: str | None = None) -> dict[str, GroupConfig]:
        """Subscription groups over every master (a group on several brokers is listed once)."""
        responses = await self._on_masters(
            lambda: RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG), cluster
        )
        groups: dict[str, GroupConfig] = {}
        for response in responses.values():
            expect_success(response)
            for obj in (json_body(response).get("subscriptionGroupTable") or {}).values():
                config = GroupConfig.from_json(obj)
                groups.setdefault(config.group, config)
        return {name: replace(groups[self.namespace.wrap(name)], group=name) for name in self._own_names(groups)}

    async def describe_group(self, group: str, *, cluster: str | None = None) -> GroupConfig:
        groups = await self.list_groups(cluster=cluster)
        if group not in groups:
            raise SubscriptionGroupNotExistError(f"subscription group {group!r} does not exist")
        return groups[group]

    async def consume_stats(
        self, group: str, topic: str | None = None, *, cluster: str | None = None
    ) -> dict[str, dict]:
        """GET_CONSUME_STATS of ``group`` from every master: broker name -> the broker's JSON answer."""
        fields = GetConsumeStatsRequestHeader.ext_fields(
            consumer_group=self.namespace.wrap(group), topic=None if topic is None else self.namespace.wrap(topic)
        )
        return await self._json_from_masters(RequestCode.GET_CONSUME_STATS, fields, cluster)

    async def gray_clients(self, group: str, *, cluster: str | None = None) -> dict[str, dict]:
        """GET_GROUP_GRAY_CLIENTS of ``group`` from every master: broker name -> its JSON answer (the live
        clients, whether each is gray, and the queues each holds or may pop there: docs/gray.md)."""
        fields = GroupRequestHeader.ext_fields(consumer_group=self.namespace.wrap(group))
        return await self._json_from_masters(GET_GROUP_GRAY_CLIENTS, fields, cluster)

    async def _json_from_masters(self, code: int, fields: dict[str, str], cluster: str | None) -> dict[str, dict]:
        responses = await self._on_masters(lambda: RemotingCommand.request(code, fields), cluster)
        result = {}
        for name, response in responses.items():
            expect_success(response)
            result[name] = json_body(response)
        return result

    # -- transactions ---------------------------------------------------------------------------------------------
    async def transaction_status(self, *, max_discarded: int = 0, cluster: str | None = None) -> dict[str, dict]:
        """GET_TRANSACTION_STATUS of every master: broker name -> ``{"pending": {topic: {"pending",
        "oldestBornMs", "queues"}}, "discarded": [...]}`` with the newest ``max_discarded`` messages put aside
        (docs/transactions.md)."""
        fields = GetTransactionStatusRequestHeader.ext_fields(max_discarded=max_discarded)
        return await self._json_from_masters(GET_TRANSACTION_STATUS, fields, cluster)

    async def resume_half_message(self, broker_name: str, offset_msg_id: str) -> dict[str, str]:
        """RESUME_CHECK_HALF_MESSAGE: the message put aside at ``offset_msg_id`` on ``broker_name``'s master is
        checked again; returns the new half message's ``queueOffset`` and ``transactionId``."""
        addr = (await self.master_addrs()).get(broker_name)
        if addr is None:
            raise ClientError(f"broker {broker_name!r} has no master registered with the name server")
        fields = ResumeCheckHalfMessageRequestHeader.ext_fields(msg_id=offset_msg_id)
        request = RemotingCommand.request(RequestCode.RESUME_CHECK_HALF_MESSAGE, fields)
        response = await self.instance.remoting.invoke(addr, request, self.config.request_timeout_s)
        expect_success(response)
        return dict(response.ext_fields)

    # -- brokers: config and runtime info ---------------------------------------------------------------------------
    async def brokers(self, broker_name: str | None = None) -> list[BrokerAddress]:
        """Every broker (masters and slaves) registered with the name server, or those of group ``broker_name``;
        BadRequestError for a group the name server does not know."""
        info = await self.cluster_info()
        if broker_name is not None and broker_name not in info.broker_addr_table:
            raise BadRequestError(
                f"broker {broker_name!r} is unknown to the name server "
                f"(known: {', '.join(sorted(info.broker_addr_table)) or 'none'})"
            )
        found = [
            BrokerAddress(name, broker_id, addr)
            for name, data in sorted(info.broker_addr_table.items())
            if broker_name in (None, name)
            for broker_id, addr in sorted(data.broker_addrs.items())
        ]
        if not found:
            raise ClientError(f"no broker is registered with the name server {self.config.namesrv_addr}")
        return found

    async def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: every setting of the broker at ``addr``, as text."""
        response = await self.instance.remoting.invoke(
            addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), self.config.request_timeout_s
        )
        expect_success(response)
        return parse_properties_text(response.body)

    async def update_broker_config(self, addr: str, changes: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: the broker applies all of ``changes`` (and keeps them) or none."""
        request = RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, body=properties_text(changes))
        expect_success(await self.instance.remoting.invoke(addr, request, self.config.request_timeout_s))

    async def runtime_info(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's table of the broker at ``addr``."""
        response = await self.instance.remoting.invoke(
            addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), self.config.request_timeout_s
        )
        expect_success(response)
        return dict(json_body(response).get("table") or {})

    # -- users and ACLs (docs/security.md) ---------------------------------------------------------------------------
    async def auth_change(self, code: int, fields: dict[str, str], body: object = None) -> list[str]:
        """A user or ACL change (AUTH_CREATE_USER ... AUTH_DELETE_ACL) on every master; returns the broker names.
        ``body``: the UserInfo or AclInfo JSON."""
        raw = json.dumps(body).encode() if body is not None else b""
        responses = await self._on_masters(lambda: RemotingCommand.request(code, fields, raw), None)
        for response in responses.values():
            expect_success(response)
        return sorted(responses)

    async def auth_read(self, code: int, fields: dict[str, str]) -> Any:
        """A user or ACL read (AUTH_GET_USER, AUTH_LIST_USER, AUTH_GET_ACL, AUTH_LIST_ACL) of one master."""
        masters = await self.master_addrs()
        addr = masters[min(masters)]
        response = await self.instance.remoting.invoke(
            addr, RemotingCommand.request(code, fields), self.config.request_timeout_s
        )
        expect_success(response)
        return json.loads(response.body) if response.body else None

    def __repr__(self) -> str:
        return f"<AsyncAdmin namesrv={self.config.namesrv_addr} started={self._started}>"


class Admin(SyncFacade):
    """The synchronous admin client, run on the process's client loop thread."""

    def __init__(self, config: ClientConfig | None = None):
        super().__init__(AsyncAdmin(config))

    def __getattr__(self, name: str):
        """Every coroutine method of ``AsyncAdmin`` (create_topic, describe_topic ...), run synchronously."""
        method = getattr(self.core, name)
        if not asyncio.iscoroutinefunction(method):
            return method

        def call(*args, **kwargs):
            return self._loop.run(method(*args, **kwargs))

        call.__name__ = name
        call.__doc__ = method.__doc__
        return call

    def __repr__(self) -> str:
        return f"<Admin {self.core!r}>"
