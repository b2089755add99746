"""ClientInstance: what the producers, consumers and admin clients of one process share per name server.

Like RocketMQ's ``MQClientInstance``: one remoting connection pool, one route cache, one heartbeat loop and
one client id (``ip@instanceName``, plus ``@gray[<ratio>]`` for a gray client: docs/gray.md). Routes of the
topics in use are refreshed from the name server every ``poll_name_server_interval_ms`` and on demand (after a
send failure); a broker that leaves every route is forgotten and its connection dropped. Every known broker
master gets a HEART_BEAT listing this client's producer and consumer groups every
``heartbeat_broker_interval_ms``; UNREGISTER_CLIENT goes to each at shutdown. Both rounds are periodic tasks
(``runtime.periodic``) on the instance's clock: a failed round is logged once per distinct error and tried again
later. Requests brokers initiate (NOTIFY_CONSUMER_IDS_CHANGED) are recorded and passed to listeners; others go
to the handler a client registered for their code (``request_handlers``: CHECK_TRANSACTION_STATE, the
operator's requests to push consumers of ``client/consumer_requests.py``).

An instance lives on one event loop. ``acquire_instance`` / ``release_instance`` share and reference-count
instances per (loop, name server, instance name).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pocketmq.client.config import ClientConfig
from pocketmq.client.message_id import MessageIdGenerator, local_ipv4
from pocketmq.client.route_view import TopicRouteView, route_view_of
from pocketmq.client.selector import SQL92, MessageSelector, as_selector
from pocketmq.common.errors import ClientError, ConnectTimeoutError, PocketMQError, RemotingError, TopicNotExistError
from pocketmq.common.gray import gray_client_id_suffix
from pocketmq.common.message import MessageQueue
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.namesrv_headers import GetRouteInfoRequestHeader
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import UnregisterClientRequestHeader
from pocketmq.protocol.route import TopicRouteData
from pocketmq.protocol.transport import RemotingClient, RemotingConnection
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock
from pocketmq.runtime.periodic import PeriodicTask

log = logging.getLogger(__name__)

ConsumerIdsListener = Callable[[str], None]


@dataclass(slots=True)
class ConsumerData:
    """One consumer group's entry in the heartbeat (RocketMQ's ConsumerData)."""

    group: str
    consume_type: str = "CONSUME_ACTIVELY"  # pull consumers; push consumers say CONSUME_PASSIVELY
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: Mapping[str, str | MessageSelector] = field(default_factory=dict)  # topic -> a tag expression
    held_queues: list[MessageQueue] | None = None  # a push consumer's assignment (group describe: docs/gray.md)

    def to_json(self, unit_mode: bool) -> dict:
        held = (
            {}
            if self.held_queues is None
            else {
                "pmqHeldQueues": [  # PocketMQ's; RocketMQ brokers ignore it
                    {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id} for mq in self.held_queues
                ]
            }
        )
        return {
            **held,
            "groupName": self.group,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "consumeFromWhere": self.consume_from_where,
            "subscriptionDataSet": [
                as_selector(self.subscriptions[topic]).subscription_json(topic) for topic in sorted(self.subscriptions)
            ],
            "unitMode": unit_mode,
        }


class ClientInstance:
    def __init__(self, config: ClientConfig, *, clock: Clock = SYSTEM_CLOCK):
        self.config = config
        self.clock = clock
        self.client_ip = config.client_ip or local_ipv4()
        self.client_id = f"{self.client_ip}@{config.instance_name}" + (
            gray_client_id_suffix(config.gray_queue_ratio) if config.enable_gray_switch else ""
        )
        self.message_ids = MessageIdGenerator.for_this_process(self.client_ip)
        self.remoting = RemotingClient(
            self._serve_request,
            connect_timeout_s=config.connect_timeout_s,
            ssl_context=config.ssl_context(),
            credentials=config.credentials,
        )
        self._routes: dict[str, TopicRouteView] = {}
        self._route_locks: dict[str, asyncio.Lock] = {}
        self._broker_addrs: dict[str, str] = {}  # broker name -> master address, over every cached route
        self._producer_groups: set[str] = set()
        self._consumers: dict[str, ConsumerData] = {}
        self._consumer_ids_listeners: list[ConsumerIdsListener] = []
        self.broker_left_listeners: list[Callable[[str], None]] = []  # get the address of a broker no route names
        self.consumer_ids_changed: dict[str, int] = {}  # group -> notifications received
        # request code -> handler(conn, request) of a request brokers send (a transaction check)
        self.request_handlers: dict[int, Callable] = {}
        self._namesrv_index = 0
        self._tasks = [
            PeriodicTask(name, action, interval_ms, clock=clock, expected=(PocketMQError,))
            for name, action, interval_ms in (
                ("pocketmq-route-refresh", self.refresh_all_routes, config.poll_name_server_interval_ms),
                ("pocketmq-heartbeat", self.heartbeat_all, config.heartbeat_broker_interval_ms),
            )
        ]
        self._started = False
        self._refs = 0

    # -- lifecycle ----------------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        for task in self._tasks:
            task.start()
        log.info("event=client_instance_started client_id=%s namesrv=%s", self.client_id, self.config.namesrv_addr)

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        await asyncio.gather(*(task.stop() for task in self._tasks))
        await self._unregister_everywhere()
        await self.remoting.close()
        log.info("event=client_instance_stopped client_id=%s", self.client_id)

    # -- groups ---------------------------------------------------------------------------------------------------
    def register_producer(self, group: str) -> None:
        self._producer_groups.add(group)

    def unregister_producer(self, group: str) -> None:
        self._producer_groups.discard(group)

    def register_consumer(self, data: ConsumerData) -> None:
        self._consumers[data.group] = data

    def unregister_consumer(self, group: str) -> None:
        self._consumers.pop(group, None)

    def add_consumer_ids_listener(self, listener: ConsumerIdsListener) -> None:
        """``listener(group)`` runs on the loop when a broker says the consumers of ``group`` changed."""
        self._consumer_ids_listeners.append(listener)

    # -- name server and routes ----------------------------------------------------------------------------------
    async def invoke_namesrv(self, request: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        """Send to the name server that answered last, trying the others in turn when it cannot be reached.
        ConnectTimeoutError when none could be connected to in time (nothing answered), else RemotingError."""
        addrs = self.config.namesrv_addrs
        errors: list[RemotingError] = []
        for step in range(len(addrs)):
            index = (self._namesrv_index + step) % len(addrs)
            try:
                response = await self.remoting.invoke(
                    addrs[index], _fresh(request), timeout_s or self.config.request_timeout_s
                )
            except RemotingError as exc:
                errors.append(exc)
                continue
            self._namesrv_index = index
            return response
        silent = bool(errors) and all(isinstance(exc, ConnectTimeoutError) for exc in errors)
        error_type = ConnectTimeoutError if silent else RemotingError
        raise error_type(f"name server {self.config.namesrv_addr} unreachable: {errors[-1] if errors else None}")

    async def fetch_route_data(self, topic: str, *, auto_create: bool = True) -> TopicRouteData:
        """The name server's route of ``topic``; TopicNotExistError when it has none. Without ``auto_create``
        the name server does not create an unknown topic for the lookup (admin reads)."""
        fields = GetRouteInfoRequestHeader.ext_fields(topic=topic, auto_create=None if auto_create else False)
        response = await self.invoke_namesrv(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, fields))
        if response.code == ResponseCode.TOPIC_NOT_EXIST or (
            response.code == ResponseCode.SUCCESS and not response.body
        ):
            raise TopicNotExistError(f"topic {topic!r} does not exist (no route on the name server)")
        expect_success(response)
        return TopicRouteData.from_json(response.body)

    async def route(self, topic: str, *, refresh: bool = False, auto_create: bool = True) -> TopicRouteView:
        """The cached route of ``topic``, fetched when absent or when ``refresh`` is set (``auto_create``: as
        ``fetch_route_data``'s)."""
        view = self._routes.get(topic)
        if view is not None and not refresh:
            return view
        lock = self._route_locks.setdefault(topic, asyncio.Lock())
        async with lock:
            current = self._routes.get(topic)
            if current is not None and current is not view:
                return current  # another task refreshed it while we waited
            return await self._update_route(topic, auto_create)

    async def _update_route(self, topic: str, auto_create: bool) -> TopicRouteView:
        try:
            data = await self.fetch_route_data(topic, auto_create=auto_create)
        except TopicNotExistError:
            if self._routes.pop(topic, None) is not None:
                self._rebuild_broker_table()
            raise
        view = route_view_of(topic, data)
        old = self._routes.get(topic)
        self._routes[topic] = view
        if old is None or old.broker_addrs != view.broker_addrs or old.write_queues != view.write_queues:
            log.info(
                "event=route_changed topic=%s brokers=%s write_queues=%d",
                topic,
                view.broker_names,
                len(view.write_queues),
            )
            new_addrs = set(view.broker_addrs.values()) - set(self._broker_addrs.values())
            self._rebuild_broker_table()
            if new_addrs and self._has_groups():
                await asyncio.gather(*(self._heartbeat(addr) for addr in new_addrs), return_exceptions=True)
        return view

    async def refresh_all_routes(self) -> None:
        for topic in list(self._routes):
            try:
                await self.route(topic, refresh=True)
            except (RemotingError, RemoteServerError, TopicNotExistError) as exc:
                log.warning("event=route_refresh_failed topic=%s error=%s", topic, exc)

    def _rebuild_broker_table(self) -> None:
        table: dict[str, str] = {}
        for view in self._routes.values():
            table.update(view.broker_addrs)
        for name, addr in self._broker_addrs.items():
            if table.get(name) != addr and addr not in table.values():
                log.info("event=broker_left_routes broker=%s addr=%s", name, addr)
                self.remoting.drop(addr)
                for listener in self.broker_left_listeners:
                    listener(addr)
        self._broker_addrs = table

    def cached_route(self, topic: str) -> TopicRouteView | None:
        return self._routes.get(topic)

    def broker_addr(self, broker_name: str) -> str:
        addr = self._broker_addrs.get(broker_name)
        if addr is None:
            raise ClientError(f"broker {broker_name!r} is in no route this client knows")
        return addr

    @property
    def broker_addrs(self) -> dict[str, str]:
        return dict(self._broker_addrs)

    # -- brokers ---------------------------------------------------------------------------------------------------
    async def invoke_broker(
        self, broker_name: str, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        return await self.remoting.invoke(
            self.broker_addr(broker_name), request, timeout_s or self.config.request_timeout_s
        )

    async def check_subscriptions(self, group: str, subscriptions: Mapping[str, str | MessageSelector]) -> None:
        """Ask every broker of each SQL92 subscription's topic whether it filters by it (CHECK_CLIENT_CONFIG, as
        RocketMQ's 4.x consumers do at start): one with property filters off fails the caller's start with
        SUBSCRIPTION_PARSE_FAILED and its reason, rather than every pull later."""
        for topic, selection in subscriptions.items():
            selector = as_selector(selection)
            if selector.expression_type != SQL92:
                continue
            body = {"clientId": self.client_id, "group": group, "subscriptionData": selector.subscription_json(topic)}
            request_body = json.dumps(body).encode()
            try:
                brokers = (await self.route(topic)).broker_names
            except PocketMQError:  # no route yet: the consumer's own start says so, its pulls will check
                continue
            for broker_name in brokers:
                request = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, request_body)
                expect_success(await self.invoke_broker(broker_name, request))

    def _has_groups(self) -> bool:
        return bool(self._producer_groups or self._consumers)

    def heartbeat_body(self) -> bytes:
        return json.dumps(
            {
                "clientID": self.client_id,
                "producerDataSet": [{"groupName": g} for g in sorted(self._producer_groups)],
                "consumerDataSet": [c.to_json(self.config.unit_mode) for _, c in sorted(self._consumers.items())],
            },
            separators=(",", ":"),
        ).encode()

    async def heartbeat_all(self) -> None:
        if not self._has_groups():
            return
        body = self.heartbeat_body()  # one body for every broker of the round
        await asyncio.gather(*(self._heartbeat(addr, body) for addr in set(self._broker_addrs.values())))

    async def _heartbeat(self, addr: str, body: bytes | None = None) -> None:
        try:
            request = RemotingCommand.request(
                RequestCode.HEART_BEAT, body=self.heartbeat_body() if body is None else body
            )
            response = await self.remoting.invoke(addr, request, self.config.request_timeout_s)
            if response.code != ResponseCode.SUCCESS:
                log.warning("event=heartbeat_rejected addr=%s code=%s remark=%s", addr, response.code, response.remark)
        except RemotingError as exc:
            log.warning("event=heartbeat_failed addr=%s error=%s", addr, exc)

    async def _unregister_everywhere(self) -> None:
        requests = []
        for addr in set(self._broker_addrs.values()):
            for group in sorted(self._producer_groups):
                requests.append(
                    (addr, UnregisterClientRequestHeader.ext_fields(client_id=self.client_id, producer_group=group))
                )
            for group in sorted(self._consumers):
                requests.append(
                    (addr, UnregisterClientRequestHeader.ext_fields(client_id=self.client_id, consumer_group=group))
                )

        async def unregister(addr: str, fields: dict[str, str]) -> None:
            try:
                await self.remoting.invoke(
                    addr,
                    RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, fields),
                    min(1.0, self.config.request_timeout_s),
                )
            except RemotingError as exc:
                log.info("event=unregister_failed addr=%s error=%s", addr, exc)

        await asyncio.gather(*(unregister(addr, fields) for addr, fields in requests))

    # -- server-initiated requests -------------------------------------------------------------------------------
    async def _serve_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            group = request.ext_fields.get("consumerGroup", "")
            self.consumer_ids_changed[group] = self.consumer_ids_changed.get(group, 0) + 1
            log.info("event=consumer_ids_changed group=%s from=%s", group, conn.remote_address)
            for listener in self._consumer_ids_listeners:
                try:
                    listener(group)
                except Exception:
                    log.exception("event=consumer_ids_listener_failed group=%s", group)
            return None  # a notification: brokers send it oneway and expect no answer
        handler = self.request_handlers.get(request.code)
        if handler is not None:
            outcome = handler(conn, request)
            return await outcome if inspect.isawaitable(outcome) else outcome
        return request.response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f"client does not serve request code {request.code}"
        )

    def __repr__(self) -> str:
        return (
            f"<ClientInstance {self.client_id} namesrv={self.config.namesrv_addr} topics={len(self._routes)} "
            f"brokers={sorted(self._broker_addrs)} refs={self._refs}>"
        )


def _fresh(request: RemotingCommand) -> RemotingCommand:
    """A copy with a new opaque, so that a request tried on a second server is not confused with the first."""
    return RemotingCommand.request(request.code, request.ext_fields, request.body)


_instances: dict[tuple, ClientInstance] = {}


async def acquire_instance(config: ClientConfig) -> ClientInstance:
    """The shared, started instance for ``config`` on the running loop; pair with ``release_instance``."""
    key = (
        id(asyncio.get_running_loop()),
        config.namesrv_addr,
        config.instance_name,
        config.client_ip,
        config.enable_gray_switch,
    )  # a gray client never shares a normal one's id
    instance = _instances.get(key)
    if instance is None:
        instance = _instances[key] = ClientInstance(config)
    instance._refs += 1
    await instance.start()
    return instance


async def checked_subscriptions(
    instance: ClientInstance, group: str, subscriptions: Mapping[str, str | MessageSelector], *, release: bool = True
) -> None:
    """``instance.check_subscriptions`` for a consumer that starts; when it fails, ``instance`` is released first
    (``release``: the consumer acquired it for itself), then the error goes on."""
    try:
        await instance.check_subscriptions(group, subscriptions)
    except BaseException:
        if release:
            await release_instance(instance)
        raise


async def release_instance(instance: ClientInstance) -> None:
    instance._refs -= 1
    if instance._refs > 0:
        return
    for key, value in list(_instances.items()):
        if value is instance:
            del _instances[key]
    await instance.shutdown()


class InstanceUser:
    """An asyncio client that works through a ``ClientInstance``: the process's shared one for its config,
    acquired at ``start`` and released at ``shutdown``, or one the caller passes in (and keeps owning).

    Subclasses register with the instance in ``_attach`` and leave it in ``_detach``.
    """

    _kind = "client"  # for the "not started" error

    def __init__(self, config: ClientConfig | None = None, *, instance: ClientInstance | None = None):
        self.config = config or ClientConfig()
        self._instance = instance
        self._owns_instance = instance is None
        self._started = False

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None or not self._started:
            raise ClientError(f"{self._kind} is not started")
        return self._instance

    async def start(self) -> None:
        if self._started:
            return
        if self._owns_instance:
            self._instance = await acquire_instance(self.config)
        self._started = True
        self._attach(self.instance)

    async def shutdown(self) -> None:
        if not self._started:
            return
        instance = self.instance
        self._started = False
        self._detach(instance)
        if self._owns_instance:
            await release_instance(instance)
            self._instance = None

    def _attach(self, instance: ClientInstance) -> None:
        """Register with the instance (heartbeats carry the client's groups)."""

    def _detach(self, instance: ClientInstance) -> None:
        """Leave the instance."""

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.shutdown()
