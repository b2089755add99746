"""The name server: ``RouteTable`` behind a remoting server (RocketMQ's ``DefaultRequestProcessor``).

Requests served (header fields as RocketMQ's classes in ``remoting/.../protocol/header/namesrv/``; docs/namesrv.md
has the full list):

| code | request | header fields | body |
|---|---|---|---|
| 103 | REGISTER_BROKER | clusterName, brokerName, brokerAddr, brokerId, haServerAddr, heartbeatTimeoutMillis?, compressed, bodyCrc32 | RegisterBrokerBody JSON |
| 104 | UNREGISTER_BROKER | clusterName, brokerName, brokerAddr, brokerId | |
| 904 | BROKER_HEARTBEAT | clusterName, brokerAddr, brokerName | |
| 105 | GET_ROUTEINFO_BY_TOPIC | topic | reply: TopicRouteData JSON |
| 106 | GET_BROKER_CLUSTER_INFO | | reply: ClusterInfo JSON |
| 206 | GET_ALL_TOPIC_LIST_FROM_NAMESERVER | | reply: TopicList JSON |
| 224 | GET_TOPICS_BY_CLUSTER | cluster | reply: TopicList JSON |
| 216 | DELETE_TOPIC_IN_NAMESRV | topic, clusterName? | |

With ``authentication_enabled``, the codes that change routes (103, 104, 904, 216) must be signed with the
cluster's inner credentials (docs/security.md); others get NO_PERMISSION and change nothing.

Any other code gets REQUEST_CODE_NOT_SUPPORTED (``RequestRouter``); a missing or malformed field gets
INVALID_PARAMETER naming it.

Liveness: a broker leaves at once when the connection it registered on closes (RocketMQ's channel destroy),
and after its timeout without REGISTER_BROKER or BROKER_HEARTBEAT (checked every ``scan_interval_ms`` by a
periodic task, ``namesrv-scan``, on the name server's clock: a scan that raises is logged, and the next goes on).

Auto-creation at route lookup (4.x clients give up on TOPIC_NOT_EXIST): for an unknown topic, the masters whose
rule allows it (``RouteTable.auto_create_plan``) are sent UPDATE_AND_CREATE_TOPIC (``create_topic_fields``) in
parallel; each that answers SUCCESS within ``auto_create_timeout_ms`` has its queues recorded at once, and the
route is answered. Concurrent lookups of one topic share one creation. With none created: TOPIC_NOT_EXIST.
"""

from __future__ import annotations

import asyncio
import logging
import zlib

from pocketmq.auth.signature import ACCESS_KEY_FIELD, Credentials, remoting_signature_matches
from pocketmq.common.errors import BadRequestError, RemotingError
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.route_table import RouteTable, TopicCreation
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.namesrv_headers import (
    BrokerAddrRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
)
from pocketmq.protocol.route import (
    WHOLE_TABLE_NEEDED,
    BrokerIdentity,
    RegisterBrokerBody,
    RouteFormatError,
    TopicRouteData,
    create_topic_fields,
    loads_lenient,
    topic_config_from_obj,
    topic_list_json,
)
from pocketmq.protocol.tls import ServerTls
from pocketmq.protocol.transport import Handler, RemotingClient, RemotingConnection, RemotingServer, RequestRouter
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock
from pocketmq.runtime.periodic import PeriodicTask

log = logging.getLogger(__name__)

_WATCHED = "namesrv_watched"  # RemotingConnection.attributes key: its close already removes its brokers


class NameServer:
    """``tls``: the TLS of a process that serves other ports too (a broker's embedded name server); without it the
    name server makes its own from ``config`` (and reloads its certificate files itself)."""

    def __init__(self, config: NamesrvConfig, clock: Clock = SYSTEM_CLOCK, *, tls: ServerTls | None = None):
        self.config = config
        settings = config.tls_settings()
        self._own_tls = tls is None and settings.serves_tls
        if self._own_tls:
            tls = ServerTls(settings)
        self.tls = tls
        self.clock = clock
        self.routes = RouteTable(
            broker_expire_ms=config.broker_expire_ms,
            delete_topic_with_broker_registration=config.delete_topic_with_broker_registration,
        )
        router = RequestRouter()
        inner = config.inner_credentials() if config.authentication_enabled else None
        for code, handler, changes_routes in (
            (RequestCode.REGISTER_BROKER, self._register_broker, True),
            (RequestCode.UNREGISTER_BROKER, self._unregister_broker, True),
            (RequestCode.BROKER_HEARTBEAT, self._broker_heartbeat, True),
            (RequestCode.GET_ROUTEINFO_BY_TOPIC, self._route_of_topic, False),
            (RequestCode.GET_BROKER_CLUSTER_INFO, self._cluster_info, False),
            (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, self._all_topics, False),
            (RequestCode.GET_TOPICS_BY_CLUSTER, self._topics_of_cluster, False),
            (RequestCode.DELETE_TOPIC_IN_NAMESRV, self._delete_topic, True),
        ):
            router.register(code, cluster_members_only(handler, inner) if changes_routes and inner else handler)
        self._server = RemotingServer(router, config.host, config.port, tls=tls)
        self._brokers = RemotingClient(
            connect_timeout_s=config.auto_create_timeout_ms / 1000,
            ssl_context=(tls.settings if tls is not None else settings).client_context(),
            credentials=config.inner_credentials(),
        )
        self._creations: dict[str, asyncio.Task] = {}  # topic -> its auto-creation in flight
        self._scan = PeriodicTask("namesrv-scan", self.expire_inactive_brokers, config.scan_interval_ms, clock=clock)

    # -- lifecycle ----------------------------------------------------------------------------------------------
    async def start(self) -> None:
        await self._server.start()
        self._scan.start()
        if self._own_tls and self.tls is not None:
            self.tls.start_reloading()
        log.info("event=namesrv_started address=%s broker_expire_ms=%d", self.address, self.config.broker_expire_ms)

    async def stop(self) -> None:
        tasks = list(self._creations.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(self._scan.stop(), *tasks, return_exceptions=True)
        await self._server.stop()
        await self._brokers.close()
        if self._own_tls and self.tls is not None:
            await self.tls.stop_reloading()
        log.info("event=namesrv_stopped")

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def address(self) -> str:
        return f"{self.config.host}:{self.port}"

    def expire_inactive_brokers(self) -> None:
        for identity in self.routes.expire(self.clock.now_ms()):
            log.warning(
                "event=broker_expired cluster=%s broker=%s id=%d addr=%s",
                identity.cluster,
                identity.broker_name,
                identity.broker_id,
                identity.broker_addr,
            )

    def _connection_closed(self, conn: RemotingConnection) -> None:
        for identity in self.routes.remove_channel(conn):
            log.info(
                "event=broker_connection_closed cluster=%s broker=%s id=%d addr=%s",
                identity.cluster,
                identity.broker_name,
                identity.broker_id,
                identity.broker_addr,
            )

    # -- broker requests ------------------------------------------------------------------------------------------
    async def _register_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = RegisterBrokerRequestHeader.parse(request.ext_fields)
        timeout_ms = h.heartbeat_timeout_ms
        identity = BrokerIdentity(
            h.cluster_name,
            h.broker_name,
            h.broker_id,
            _broker_addr(h),
            h.ha_server_addr,
            timeout_ms if timeout_ms is not None and timeout_ms > 0 else None,  # else the name server's expiry
        )
        if h.compressed:
            raise BadRequestError("compressed registration bodies are not supported: set compressedRegister=false")
        if h.body_crc32 and h.body_crc32 != zlib.crc32(request.body):
            return request.response(ResponseCode.SYSTEM_ERROR, remark="crc32 not match")  # RocketMQ's answer
        try:
            body = RegisterBrokerBody.from_json(request.body) if request.body else RegisterBrokerBody()
        except RouteFormatError as exc:
            raise BadRequestError(f"registration body: {exc}") from None
        result = self.routes.register(identity, body, now_ms=self.clock.now_ms(), channel=conn)
        if not conn.attributes.get(_WATCHED):
            conn.attributes[_WATCHED] = True
            conn.on_close(self._connection_closed)
        if result.is_new:
            log.info(
                "event=broker_registered cluster=%s broker=%s id=%d addr=%s topics=%d grpc=%s",
                identity.cluster,
                identity.broker_name,
                identity.broker_id,
                identity.broker_addr,
                len(body.topics),
                body.flags.grpc_addr,
            )
        fields = {"masterAddr": result.master_addr, "haServerAddr": result.ha_server_addr}
        if result.is_new and body.flags.incremental:
            fields[WHOLE_TABLE_NEEDED] = "true"  # it listed a few topics to a name server that knew none of its
        return request.response(ext_fields=fields)

    async def _unregister_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = UnRegisterBrokerRequestHeader.parse(request.ext_fields)
        identity = self.routes.unregister(h.cluster_name, _broker_addr(h))
        if identity is not None:
            log.info(
                "event=broker_unregistered cluster=%s broker=%s id=%d addr=%s",
                identity.cluster,
                identity.broker_name,
                identity.broker_id,
                identity.broker_addr,
            )
        return request.response()

    async def _broker_heartbeat(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = BrokerAddrRequestHeader.parse(request.ext_fields)
        # An unknown broker is not an error (RocketMQ ignores it too): its next registration brings it back.
        self.routes.heartbeat(h.cluster_name, _broker_addr(h), now_ms=self.clock.now_ms())
        return request.response()

    # -- client requests ------------------------------------------------------------------------------------------
    async def _route_of_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = GetRouteInfoRequestHeader.parse(request.ext_fields)
        topic = h.topic
        # autoCreate=false (PocketMQ's; docs/protocol.md): an admin's look at a topic, which must not create it
        route = self.routes.route(topic) or (await self._auto_create(topic) if h.auto_create else None)
        if route is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST,
                remark=f"No topic route info in name server for the topic: {topic} "
                f"(and no master broker created it on lookup)",
            )
        return request.response(body=route.to_json())

    async def _cluster_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return request.response(body=self.routes.cluster_info().to_json())

    async def _all_topics(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return request.response(body=topic_list_json(self.routes.topics()))

    async def _topics_of_cluster(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        cluster = GetTopicsByClusterRequestHeader.parse(request.ext_fields).cluster
        return request.response(body=topic_list_json(self.routes.topics_of_cluster(cluster)))

    async def _delete_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = DeleteTopicFromNamesrvRequestHeader.parse(request.ext_fields)
        topic, cluster = h.topic, h.cluster_name
        if self.routes.delete_topic(topic, cluster):
            log.info("event=topic_deleted topic=%s cluster=%s", topic, cluster or "*")
        return request.response()

    # -- auto-creation --------------------------------------------------------------------------------------------
    async def _auto_create(self, topic: str) -> TopicRouteData | None:
        task = self._creations.get(topic)
        if task is None:
            plan = self.routes.auto_create_plan(topic)
            if not plan:
                return None
            task = asyncio.create_task(self._create_on_brokers(topic, plan), name=f"pocketmq-autocreate-{topic}")
            self._creations[topic] = task
            task.add_done_callback(lambda _: self._creations.pop(topic, None))
        # Shielded: a lookup whose connection closes must not cancel the creation others wait for.
        await asyncio.shield(task)
        return self.routes.route(topic)

    async def _create_on_brokers(self, topic: str, plan: list[TopicCreation]) -> None:
        await asyncio.gather(*(self._create_on(topic, creation) for creation in plan))

    async def _create_on(self, topic: str, creation: TopicCreation) -> None:
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_fields(creation.config, auto_create=True)
        )
        try:
            response = await self._brokers.invoke(
                creation.master_addr, request, self.config.auto_create_timeout_ms / 1000
            )
        except RemotingError as exc:
            log.warning(
                "event=topic_auto_create_failed topic=%s broker=%s addr=%s error=%s",
                topic,
                creation.broker_name,
                creation.master_addr,
                exc,
            )
            return
        if response.code != ResponseCode.SUCCESS:
            log.warning(
                "event=topic_auto_create_refused topic=%s broker=%s code=%s remark=%s",
                topic,
                creation.broker_name,
                response.code,
                response.remark,
            )
            return
        # A PocketMQ broker answers with the topic as it really is (it may have existed already, with other
        # queue numbers, and its registration may not have reached us yet); a RocketMQ broker sends no body.
        config = creation.config
        if response.body:
            try:
                config = topic_config_from_obj(topic, loads_lenient(response.body))
            except (RouteFormatError, ValueError) as exc:
                log.warning("event=topic_auto_create_reply_unreadable topic=%s error=%s", topic, exc)
        self.routes.record_created(topic, creation.broker_name, config)
        log.info(
            "event=topic_auto_created topic=%s broker=%s queues=%d",
            topic,
            creation.broker_name,
            config.write_queue_nums,
        )

    def __repr__(self) -> str:
        where = self.address if self._scan.running else "stopped"
        return f"<NameServer {where} {self.routes!r}>"


def cluster_members_only(handler: Handler, inner: Credentials) -> Handler:
    """``handler`` for requests signed with the cluster's inner credentials; NO_PERMISSION for the others."""

    def guarded(conn: RemotingConnection, request: RemotingCommand):
        fields = request.ext_fields
        if fields.get(ACCESS_KEY_FIELD) != inner.access_key or not remoting_signature_matches(
            inner.secret_key, fields, request.body
        ):
            log.warning("event=access_denied code=%d remote=%s", request.code, conn.remote_address)
            return request.response(
                ResponseCode.NO_PERMISSION, remark=f"request code {request.code} is for the cluster's members only"
            )
        return handler(conn, request)

    return guarded


def _broker_addr(h: BrokerAddrRequestHeader) -> str:
    addr = h.broker_addr
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise BadRequestError(f"header field brokerAddr={addr!r} is not HOST:PORT")
    return addr
