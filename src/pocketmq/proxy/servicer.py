"""One proxy worker's ``apache.rocketmq.v2.MessagingService`` servicer: the v2 RPCs over remoting.

- QueryRoute: the name server's route, every broker's queues on the proxy's own endpoint (the endpoints the
  client dialled, as the embedded front end echoes them), as RocketMQ's proxy answers. A group whose master is
  gone is served through its lowest-id slave, read only (server/grpc_routing.py).
- SendMessage: checked as on the embedded front end (server/grpc_validation.py), then SEND_MESSAGE_V2 per message
  (proxy/sender.py); TRANSACTION entries are half messages (proxy/transactions.py). The topic's message type is
  the broker's to check: a mismatch comes back as the broker's refusal.
- Heartbeat, Telemetry, NotifyClientTermination: ``ClientRpcs`` (server/grpc_client_rpcs.py), per worker; this
  servicer is their ``SessionPolicy``.
- ReceiveMessage, AckMessage, ChangeInvisibleDuration, QueryAssignment: proxy/consumer.py.
- EndTransaction: proxy/transactions.py. RecallMessage: RECALL_MESSAGE to the broker the handle names.
- Access control (proxy/access.py): with a gate, every RPC is authorized as on the embedded front end, with the
  same rights per RPC (server/grpc_access.py) and the same UNAUTHORIZED status; without one nothing is checked.
- Not served: ForwardMessageToDeadLetterQueue and SyncLiteSubscription (a NOT_IMPLEMENTED status); the pull
  RPCs (gRPC UNIMPLEMENTED: the Apache proxy does not serve them either).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pocketmq.broker.pop.renewal import RenewalTable
from pocketmq.broker.pop.revive import retry_limit
from pocketmq.client.instance import ClientInstance
from pocketmq.common.errors import AccessDeniedError
from pocketmq.common.topic import MessageType
from pocketmq.protocol import grpc_codec as codec
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.grpc_codec import ClientSettings
from pocketmq.protocol.grpc_service import Malformed
from pocketmq.proxy.consumer import ProxyConsumerRpcs
from pocketmq.proxy.groups import GroupSettings
from pocketmq.proxy.options import ProxyOptions
from pocketmq.proxy.sender import V2_CODE_OF_SEND_STATUS, ProxySender
from pocketmq.proxy.transactions import PRODUCER, ProxyTransactions
from pocketmq.runtime.clock import Clock
from pocketmq.server.access_contexts import PUB, topic_contexts
from pocketmq.server.client_metrics import metric_endpoint
from pocketmq.server.grpc_access import PUB_OR_SUB, GrpcAccessGate, consumer_contexts, unary_contexts
from pocketmq.server.grpc_calls import abort_malformed, client_address, guard, unary_not_implemented
from pocketmq.server.grpc_client_rpcs import ClientRpcs
from pocketmq.server.grpc_routing import route_queues
from pocketmq.server.grpc_servicer import DEFAULT_MAX_INFLIGHT_SENDS
from pocketmq.server.grpc_transaction import as_half_message
from pocketmq.server.grpc_validation import SendLimits, check_send_request, check_topic, validate_message
from pocketmq.server.sessions import SessionRegistry

log = logging.getLogger(__name__)


class ProxyServicer:
    """Methods are named as the RPCs (grpc binds them by name)."""

    def __init__(
        self,
        options: ProxyOptions,
        instance: ClientInstance,
        sender: ProxySender,
        groups: GroupSettings,
        sessions: SessionRegistry,
        clock: Clock,
        *,
        gate: GrpcAccessGate | None = None,
        client_peer: Callable[[str], str] | None = None,
        max_inflight_sends: int = DEFAULT_MAX_INFLIGHT_SENDS,
    ):
        """``client_peer``: the client's address for the peer grpc reports (a TLS front in between, see
        server/grpc_tls_front.py); by default the peer itself."""
        self._options = options
        self._client_peer = client_peer or (lambda peer: peer)
        self._gate = gate  # None: access control off
        self._instance = instance
        self._sender = sender
        self._groups = groups
        self._clock = clock
        self._limits = SendLimits(max_body_bytes=options.max_message_bytes)
        self._max_inflight_sends = max_inflight_sends
        self._inflight_sends = 0
        self.clients = ClientRpcs(sessions, clock, self)
        self.consumers = ProxyConsumerRpcs(
            instance,
            groups,
            sessions,
            options.request_timeout_s,
            RenewalTable(invisible_ms=options.auto_renew_invisible_ms, ahead_ms=options.auto_renew_ahead_ms),
        )
        self.transactions = ProxyTransactions(instance, sessions, options.request_timeout_s)
        self.calls = 0  # RPCs served by this worker (its log line at stop says how its share went)

    # -- routes ---------------------------------------------------------------------------------------------------
    async def QueryRoute(self, request, context):
        if isinstance(request, Malformed):
            await abort_malformed(context, "QueryRoute", request)
        self.calls += 1
        return await guard("QueryRoute", self._query_route(request, context), codec.route_error_response)

    async def _query_route(self, request, context):
        topic, dialled, dialled_domain = codec.decode_route_request(request)
        check_topic(topic)
        self.authorize(context, topic_contexts(topic, PUB_OR_SUB))
        route = await self._instance.fetch_route_data(topic)
        queues = route_queues(
            route,
            topic,
            own_broker_addr=None,
            own_grpc_addr=self._options.grpc_addr,
            dialled=dialled,
            dialled_domain=dialled_domain,
            message_type=MessageType.MIXED,  # each broker checks its topic's type
        )
        return codec.route_response(queues)

    # -- send -----------------------------------------------------------------------------------------------------
    async def SendMessage(self, request, context):
        if isinstance(request, Malformed):
            await abort_malformed(context, "SendMessage", request)
        self.calls += 1
        count = len(request.messages)

        def refuse(code: int, message: str):
            return codec.send_error_response(code, message, count)

        if self._inflight_sends >= self._max_inflight_sends:
            return refuse(V2StatusCode.TOO_MANY_REQUESTS, f"more than {self._max_inflight_sends} sends in flight")
        self._inflight_sends += 1
        try:
            return await guard("SendMessage", self._send(request, context), refuse)
        finally:
            self._inflight_sends -= 1

    async def _send(self, request, context):
        inbound = codec.decode_send_request(request)
        topic = check_send_request(inbound)
        self.authorize(context, topic_contexts(topic, PUB))
        now_ms = self._clock.now_ms()
        valid = [validate_message(m, topic_type=MessageType.MIXED, limits=self._limits, now_ms=now_ms) for m in inbound]
        entries = []
        for one in valid:  # in order: a FIFO request's messages keep theirs
            msg = one.to_domain()
            half = one.message_type == "TRANSACTION"
            if half:
                as_half_message(msg, one, self._options.transaction_max_recovery_s)
            result = await self._sender.send_message(msg, half=half)
            if half:
                self.transactions.remember_send(one.message_id, topic, result)
            entries.append(
                codec.SendEntry(
                    V2_CODE_OF_SEND_STATUS[result.status],
                    message_id=result.msg_id,
                    queue_offset=result.queue_offset,
                    transaction_id=one.message_id if half else None,
                    recall_handle=result.recall_handle,
                )
            )
        return codec.send_response(entries)

    # -- sessions (server/grpc_client_rpcs.py) ----------------------------------------------------------------------
    async def Heartbeat(self, request, context):
        self.calls += 1
        return await self.clients.heartbeat(request, context)

    async def NotifyClientTermination(self, request, context):
        return await self.clients.terminate(request, context)

    def Telemetry(self, request_iterator, context):
        return self.clients.telemetry(request_iterator, context)

    def client_address(self, context) -> str:
        return client_address(self._peer(context))

    def _peer(self, context) -> str:
        return self._client_peer(context.peer() or "")

    def authorize(self, context, contexts) -> None:
        """AccessDeniedError unless the caller may do all of ``contexts`` (``SessionPolicy``; nothing checked
        with access control off)."""
        if self._gate is not None:
            self._gate.check(context.invocation_metadata(), self._peer(context), contexts)

    async def settings_reply_args(self, settings: ClientSettings, language: str) -> dict:
        """What the proxy's Settings replies say (``SessionPolicy``): a producer's topics make this worker a
        producer of their groups (transaction checks); a consumer gets its group's FIFO flag and attempts."""
        args: dict = {
            "max_body_bytes": self._limits.max_body_bytes,
            "metric_endpoint": metric_endpoint(
                None, client_type=settings.client_type, language=language, own_grpc_addr=self._options.grpc_addr
            ),
        }
        if settings.client_type == PRODUCER:
            await self.transactions.publish(settings.topics)
        elif settings.group:
            config = await self._groups.get(settings.group)
            if config is not None:
                args["fifo"] = config.consume_message_orderly
                args["consumer_max_attempts"] = retry_limit(config.retry_max_times) + 1
        return args

    # -- consumers (proxy/consumer.py) ------------------------------------------------------------------------------
    async def ReceiveMessage(self, request, context):
        if isinstance(request, Malformed):
            await abort_malformed(context, "ReceiveMessage", request)
        self.calls += 1
        try:
            self.authorize(context, consumer_contexts(*codec.group_and_topic(request)))
        except AccessDeniedError as exc:
            yield codec.receive_status(V2StatusCode.UNAUTHORIZED, str(exc))
            return
        async for response in self.consumers.receive(request, context):
            yield response

    async def QueryAssignment(self, request, context):
        return await self._unary("QueryAssignment", self.consumers.query_assignment, request, context)

    async def AckMessage(self, request, context):
        return await self._unary("AckMessage", self.consumers.ack, request, context)

    async def ChangeInvisibleDuration(self, request, context):
        return await self._unary("ChangeInvisibleDuration", self.consumers.change_invisible, request, context)

    # -- transactions (proxy/transactions.py) -----------------------------------------------------------------------
    async def EndTransaction(self, request, context):
        return await self._unary("EndTransaction", self.transactions.end_transaction, request, context, publishes=True)

    # -- recall -----------------------------------------------------------------------------------------------------
    async def RecallMessage(self, request, context):
        return await self._unary("RecallMessage", self._recall, request, context, publishes=True)

    async def _recall(self, request, context):
        topic, handle = codec.decode_recall_request(request)
        check_topic(topic)
        return codec.recall_response(await self._sender.recall_message(topic, handle))

    # -- not served -------------------------------------------------------------------------------------------------
    ForwardMessageToDeadLetterQueue = unary_not_implemented(
        "ForwardMessageToDeadLetterQueue", "the proxy does not forward to the dead letter queue"
    )
    SyncLiteSubscription = unary_not_implemented("SyncLiteSubscription", "lite consumers are not supported")

    # -- helpers --------------------------------------------------------------------------------------------------
    async def _unary(self, method: str, rpc, request, context, *, publishes: bool = False):
        """``publishes``: the RPC ends a producer's work (Pub on the topic), else a consumer's (Sub)."""
        if isinstance(request, Malformed):
            await abort_malformed(context, method, request)
        self.calls += 1

        async def authorized():
            group, topic = codec.group_and_topic(request)
            self.authorize(context, unary_contexts(group, topic, publishes=publishes))
            return await rpc(request, context)

        return await guard(method, authorized(), lambda code, message: codec.error_response(method, code, message))

    def __repr__(self) -> str:
        return f"<ProxyServicer {self._options.grpc_addr} calls={self.calls} inflight_sends={self._inflight_sends}>"
