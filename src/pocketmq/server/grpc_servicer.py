"""The ``apache.rocketmq.v2.MessagingService`` servicer: the v2 front end over the Broker facade.

Implemented: QueryRoute, Heartbeat, Telemetry, SendMessage (TRANSACTION entries too), EndTransaction (see
server/grpc_transaction.py), NotifyClientTermination, the POP consumer RPCs (ReceiveMessage, Ack,
ChangeInvisibleDuration, QueryAssignment, ForwardMessageToDeadLetterQueue, and SyncLiteSubscription for lite
consumers: see server/grpc_consumer.py), the pull consumer RPCs (PullMessage, UpdateOffset, GetOffset,
QueryOffset: server/grpc_pull.py) and RecallMessage (broker/timer/recall.py).

Every RPC answers with a v2 status: a ``PocketMQError`` becomes its ``v2_code``; anything else is logged
and answered INTERNAL_SERVER_ERROR. Bytes that are not the method's protobuf arrive as ``Malformed`` (see
protocol/grpc_service.py) and get gRPC INVALID_ARGUMENT; inside a Telemetry stream they get a status
command and the stream goes on. No request can end another request, a stream, or the server.

Heartbeat, Telemetry and NotifyClientTermination are ``ClientRpcs`` (server/grpc_client_rpcs.py), shared with
the proxy; this servicer is their ``SessionPolicy``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pocketmq.broker.pop.revive import retry_limit
from pocketmq.broker.timer.delay import parse_delay_levels
from pocketmq.common.errors import AccessDeniedError, ServiceNotAvailableError, TopicNotExistError
from pocketmq.common.topic import MessageType
from pocketmq.protocol import grpc_codec as codec
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.grpc_codec import ClientSettings
from pocketmq.protocol.grpc_service import Malformed
from pocketmq.runtime.clock import Clock
from pocketmq.server.access_contexts import PUB, topic_contexts
from pocketmq.server.client_metrics import metric_endpoint
from pocketmq.server.grpc_access import PUB_OR_SUB, GrpcAccessGate, consumer_contexts, unary_contexts
from pocketmq.server.grpc_calls import abort_malformed as _abort_malformed
from pocketmq.server.grpc_calls import client_address, client_id_of, guard, peer_address
from pocketmq.server.grpc_client_rpcs import ClientRpcs
from pocketmq.server.grpc_consumer import ConsumerRpcs
from pocketmq.server.grpc_pull import PullRpcs
from pocketmq.server.grpc_routing import local_route, route_queues
from pocketmq.server.grpc_transaction import TransactionRpcs, as_half_message
from pocketmq.server.grpc_validation import (
    SendLimits,
    check_send_request,
    check_topic,
    validate_message,
)
from pocketmq.server.sessions import SessionRegistry
from pocketmq.store.api import PutStatus

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

log = logging.getLogger(__name__)
# A message stored with a weaker guarantee is not an OK send (the proxy's mapping): an OK means what a remoting
# SEND_OK means, on the master's disk and, under SYNC replication, on a slave.
_SEND_CODE_OF_PUT = {
    PutStatus.FLUSH_DISK_TIMEOUT: V2StatusCode.MASTER_PERSISTENCE_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: V2StatusCode.SLAVE_PERSISTENCE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: V2StatusCode.HA_NOT_AVAILABLE,
}

DEFAULT_MAX_INFLIGHT_SENDS = 2048


class MessagingServicer:
    """One broker's v2 service; methods are named as the RPCs (grpc binds them by name)."""

    def __init__(
        self,
        broker: Broker,
        sessions: SessionRegistry,
        clock: Clock,
        *,
        max_inflight_sends: int = DEFAULT_MAX_INFLIGHT_SENDS,
        client_peer: Callable[[str], str] | None = None,
    ):
        """``client_peer``: the client's address for the peer grpc reports (a TLS front in between, see
        server/grpc_tls_front.py); by default the peer itself."""
        self._broker = broker
        self._client_peer = client_peer or (lambda peer: peer)
        self._sessions = sessions
        self._clock = clock
        self._max_inflight_sends = max_inflight_sends
        self._inflight_sends = 0
        self._limits = SendLimits(
            max_body_bytes=broker.config.max_message_bytes, max_delay_ms=broker.config.timer_max_delay_ms
        )  # the timer's horizon
        self.clients = ClientRpcs(sessions, clock, self)
        self.consumers = self._consumers = ConsumerRpcs(broker, sessions)
        self._transactions = TransactionRpcs(broker, sessions)
        self._pulls = PullRpcs(broker)
        self._gate = GrpcAccessGate(broker.access) if broker.access.enabled else None  # None: access control off
        self._consumer_backoff_s = tuple(
            max(1, level_ms // 1000) for level_ms in parse_delay_levels(broker.config.message_delay_level)
        )

    # -- routes ---------------------------------------------------------------------------------------------------
    async def QueryRoute(self, request, context):
        if isinstance(request, Malformed):
            await _abort_malformed(context, "QueryRoute", request)
        return await self._guard("QueryRoute", self._query_route(request, context), codec.route_error_response)

    async def _query_route(self, request, context):
        topic, dialled, dialled_domain = codec.decode_route_request(request)
        check_topic(topic)
        self._require_started()
        self.authorize(context, topic_contexts(topic, PUB_OR_SUB))
        route = await self._route(topic)
        local = self._broker.topics.get(topic)
        queues = route_queues(
            route,
            topic,
            own_broker_addr=self._broker.broker_addr,
            own_grpc_addr=self._broker.grpc_addr,
            dialled=dialled,
            dialled_domain=dialled_domain,
            message_type=local.message_type if local is not None else MessageType.MIXED,
        )
        if not queues:
            raise TopicNotExistError(f"no broker of topic {topic!r} serves gRPC")
        return codec.route_response(queues)

    async def _route(self, topic: str):
        """The topic's route over every broker; this broker's own view when the name servers do not know it.

        That covers a broker without name servers, a topic created here but not registered yet, and a topic
        this broker creates now (auto-creation, as a remoting send would).
        """
        namesrv = self._broker.namesrv_client()
        if namesrv.addrs:
            try:
                return await namesrv.route(topic)
            except TopicNotExistError:
                pass
        config = self._broker.topics.get_or_create(topic)
        broker = self._broker
        return local_route(
            config,
            cluster=broker.config.cluster_name,
            broker_name=broker.broker_name,
            broker_addr=broker.broker_addr,
            grpc_addr=broker.grpc_addr,
        )

    # -- send -----------------------------------------------------------------------------------------------------
    async def SendMessage(self, request, context):
        if isinstance(request, Malformed):
            await _abort_malformed(context, "SendMessage", request)
        count = len(request.messages)

        def refuse(code: int, message: str):
            return codec.send_error_response(code, message, count)

        if self._inflight_sends >= self._max_inflight_sends:
            return refuse(V2StatusCode.TOO_MANY_REQUESTS, f"more than {self._max_inflight_sends} sends in flight")
        self._inflight_sends += 1
        try:
            return await self._guard("SendMessage", self._send(request, context), refuse)
        finally:
            self._inflight_sends -= 1

    async def _send(self, request, context):
        inbound = codec.decode_send_request(request)
        topic = check_send_request(inbound)
        self._require_started()
        self.authorize(context, topic_contexts(topic, PUB))
        config = self._broker.topics.get_or_create(topic)
        now_ms = self._clock.now_ms()
        valid = [
            validate_message(m, topic_type=config.message_type, limits=self._limits, now_ms=now_ms) for m in inbound
        ]
        first = valid[0]
        peer_host, peer_port = peer_address(self._peer(context))
        messages = [m.to_domain() for m in valid]
        for msg, inbound in zip(messages, valid):
            if inbound.message_type == "TRANSACTION":
                as_half_message(msg, inbound, self._broker.config.transaction_max_recovery_s)
        # Validation checked each message's type against the topic: the service need not check it again.
        results = await self._broker.messages.send(
            messages,
            topic=topic,
            born_host=(first.born_host or peer_host, peer_port),
            born_timestamp_ms=first.born_timestamp_ms or now_ms,
        )
        return codec.send_response(
            [
                codec.SendEntry(
                    _SEND_CODE_OF_PUT.get(r.status, V2StatusCode.OK),
                    message_id=r.msg_id,
                    queue_offset=r.queue_offset,
                    transaction_id=r.transaction_id,
                    recall_handle=r.recall_handle,
                )
                for r in results
            ]
        )

    # -- sessions (server/grpc_client_rpcs.py) -------------------------------------------------------------------
    async def Heartbeat(self, request, context):
        return await self.clients.heartbeat(request, context)

    async def NotifyClientTermination(self, request, context):
        return await self.clients.terminate(request, context)

    def Telemetry(self, request_iterator, context):
        return self.clients.telemetry(request_iterator, context)

    async def settings_reply_args(self, settings: ClientSettings, language: str) -> dict:
        """What this broker's Settings replies say (``SessionPolicy``): its body limit, the metrics endpoint,
        the group's FIFO flag and max attempts (retry max times + 1), the broker's delay levels as the
        consumers' customized backoff (a push consumer nacks with the level of the message's attempt), and the
        lite limits (broker/lite)."""
        config = self._broker.groups.get(settings.group) if settings.group else None
        retry_max_times = config.retry_max_times if config is not None else -1
        broker_config = self._broker.config
        return {
            "max_body_bytes": self._limits.max_body_bytes,
            "metric_endpoint": metric_endpoint(
                self._broker.config.client_metrics_endpoint,
                client_type=settings.client_type,
                language=language,
                own_grpc_addr=self._broker.grpc_addr,
            ),
            "fifo": bool(config is not None and config.consume_message_orderly),
            "consumer_max_attempts": retry_limit(retry_max_times) + 1,
            "consumer_backoff_seconds": self._consumer_backoff_s,
            "lite_subscription_quota": broker_config.lite_subscription_quota,
            "max_lite_topic_size": broker_config.lite_topic_max_name_length,
        }

    # -- consumers (server/grpc_consumer.py) ----------------------------------------------------------------------
    async def ReceiveMessage(self, request, context):
        if isinstance(request, Malformed):
            await _abort_malformed(context, "ReceiveMessage", request)
        try:
            self.authorize(context, consumer_contexts(*codec.group_and_topic(request)))
        except AccessDeniedError as exc:
            yield codec.receive_status(V2StatusCode.UNAUTHORIZED, str(exc))
            return
        async for response in self._consumers.receive(request, context, client_id_of(context)):
            yield response

    async def QueryAssignment(self, request, context):
        client_id = client_id_of(context)  # the gray split depends on who asks
        assign = functools.partial(self._consumers.query_assignment, client_id=client_id)
        return await self._consumer_rpc("QueryAssignment", assign, request, context)

    async def AckMessage(self, request, context):
        return await self._consumer_rpc("AckMessage", self._consumers.ack, request, context)

    async def ChangeInvisibleDuration(self, request, context):
        return await self._consumer_rpc("ChangeInvisibleDuration", self._consumers.change_invisible, request, context)

    async def SyncLiteSubscription(self, request, context):
        client_id = client_id_of(context)  # subscriptions are per client
        sync = functools.partial(self._consumers.sync_lite_subscription, client_id=client_id)
        return await self._consumer_rpc("SyncLiteSubscription", sync, request, context)

    async def ForwardMessageToDeadLetterQueue(self, request, context):
        return await self._consumer_rpc(
            "ForwardMessageToDeadLetterQueue", self._consumers.forward_to_dead_letter, request, context
        )

    async def _consumer_rpc(self, method: str, rpc, request, context, *, publishes: bool = False):
        """``publishes``: the RPC ends a producer's transaction (Pub on the topic), else a consumer's (Sub)."""
        if isinstance(request, Malformed):
            await _abort_malformed(context, method, request)
        self._require_started()

        async def authorized():
            group, topic = codec.group_and_topic(request)
            self.authorize(context, unary_contexts(group, topic, publishes=publishes))
            return await rpc(request, context)

        return await self._guard(
            method, authorized(), lambda code, message: codec.error_response(method, code, message)
        )

    # -- transactions (server/grpc_transaction.py) ---------------------------------------------------------------
    async def EndTransaction(self, request, context):
        return await self._consumer_rpc(
            "EndTransaction", self._transactions.end_transaction, request, context, publishes=True
        )

    # -- pull consumers (server/grpc_pull.py) ---------------------------------------------------------------------
    async def PullMessage(self, request, context):
        if isinstance(request, Malformed):
            await _abort_malformed(context, "PullMessage", request)
        if not self._broker.started:
            yield codec.error_response(
                "PullMessage", V2StatusCode.INTERNAL_SERVER_ERROR, "the broker is starting or stopping"
            )
            return
        try:
            self.authorize(context, consumer_contexts(*codec.group_and_topic(request)))
        except AccessDeniedError as exc:
            yield codec.error_response("PullMessage", V2StatusCode.UNAUTHORIZED, str(exc))
            return
        async for response in self._pulls.pull(request, context):
            yield response

    async def UpdateOffset(self, request, context):
        return await self._consumer_rpc("UpdateOffset", self._pulls.update_offset, request, context)

    async def GetOffset(self, request, context):
        return await self._consumer_rpc("GetOffset", self._pulls.get_offset, request, context)

    async def QueryOffset(self, request, context):
        return await self._consumer_rpc("QueryOffset", self._pulls.query_offset, request, context)

    # -- recall of delayed messages (broker/timer/recall.py) --------------------------------------------------------
    async def RecallMessage(self, request, context):
        return await self._consumer_rpc("RecallMessage", self._recall, request, context, publishes=True)

    async def _recall(self, request, context):
        topic, handle = codec.decode_recall_request(request)
        check_topic(topic)
        message_id, _ = await self._broker.timer.recall_by_handle(handle, topic)
        return codec.recall_response(message_id)

    # -- helpers --------------------------------------------------------------------------------------------------
    def authorize(self, context, contexts) -> None:
        """AccessDeniedError unless the caller may do all of ``contexts`` (nothing checked with access control off)."""
        if self._gate is not None:
            self._gate.check(context.invocation_metadata(), self._peer(context), contexts)

    def client_address(self, context) -> str:
        return client_address(self._peer(context))

    def _peer(self, context) -> str:
        return self._client_peer(context.peer() or "")

    def _require_started(self) -> None:
        if not self._broker.started:
            raise ServiceNotAvailableError("the broker is starting or stopping")

    _guard = staticmethod(guard)

    def __repr__(self) -> str:
        return f"<MessagingServicer broker={self._broker.broker_name} inflight_sends={self._inflight_sends}>"
