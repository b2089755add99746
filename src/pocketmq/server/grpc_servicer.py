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

Telemetry: each stream is registered in the session registry under the ``x-mq-client-id`` header; what the
server sends on it (settings replies, transaction checks) goes through the session's outbox, so
any part of the broker can push a command to a live client with ``sessions.get(client_id).push(cmd)``.
The stream ends when the client half-closes it, when the session is dropped (heartbeat expiry) or when a newer
stream of the same client replaces it. After NotifyClientTermination it waits (up to
``TERMINATED_STREAM_LINGER_S``) for the client to end it, as the clients do right after.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import grpc

from pocketmq.broker.pop.revive import retry_limit
from pocketmq.broker.timer.delay import parse_delay_levels
from pocketmq.common.errors import AccessDeniedError, PocketMQError, ServiceNotAvailableError, TopicNotExistError
from pocketmq.common.topic import MessageType
from pocketmq.protocol import grpc_codec as codec
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.error_codes import V2StatusError, v2_code_of
from pocketmq.protocol.grpc_service import Malformed
from pocketmq.runtime.clock import Clock
from pocketmq.server.access_contexts import PUB, group_context, topic_contexts
from pocketmq.server.client_metrics import metric_endpoint
from pocketmq.server.grpc_access import PUB_OR_SUB, GrpcAccessGate, consumer_contexts, settings_contexts
from pocketmq.server.grpc_consumer import ConsumerRpcs
from pocketmq.server.grpc_pull import PullRpcs
from pocketmq.server.grpc_routing import local_route, parse_address, route_queues
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

CLIENT_ID_HEADER = "x-mq-client-id"
LANGUAGE_HEADER = "x-mq-language"
DEFAULT_MAX_INFLIGHT_SENDS = 2048
TERMINATED_STREAM_LINGER_S = 3.0  # how long a terminated client's stream waits for the client to end it
# The client kinds the v2 protocol defines; a Settings with another one is UNRECOGNIZED_CLIENT_TYPE.
_KNOWN_CLIENT_TYPES = frozenset(
    {"PRODUCER", "PUSH_CONSUMER", "SIMPLE_CONSUMER", "PULL_CONSUMER", "LITE_PUSH_CONSUMER", "LITE_SIMPLE_CONSUMER"}
)


def peer_address(peer: str) -> tuple[str, int]:
    """(host, port) of a grpc peer string (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``); ("127.0.0.1", 0) otherwise."""
    _, _, address = peer.partition(":")
    parsed = parse_address(address)
    return parsed if parsed is not None else ("127.0.0.1", 0)


def _header(context, name: str) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == name:
            return value
    return ""


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
        self.terminated_stream_linger_s = TERMINATED_STREAM_LINGER_S
        self._inflight_sends = 0
        self._limits = SendLimits(
            max_body_bytes=broker.config.max_message_bytes, max_delay_ms=broker.config.timer_max_delay_ms
        )  # the timer's horizon
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
        self._authorize(context, topic_contexts(topic, PUB_OR_SUB))
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
        self._authorize(context, topic_contexts(topic, PUB))
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

    # -- sessions -------------------------------------------------------------------------------------------------
    async def Heartbeat(self, request, context):
        if isinstance(request, Malformed):
            await _abort_malformed(context, "Heartbeat", request)
        return await self._guard("Heartbeat", self._heartbeat(request, context), codec.heartbeat_response)

    async def _heartbeat(self, request, context):
        client_id = self._require_client_id(context)
        client_type, group = codec.decode_heartbeat(request)
        self._authorize(context, [group_context(group)] if group else [])
        self._sessions.heartbeat(
            client_id,
            self._clock.now_ms(),
            client_type=client_type,
            group=group,
            language=_header(context, LANGUAGE_HEADER),
        )
        return codec.heartbeat_response()

    async def NotifyClientTermination(self, request, context):
        if isinstance(request, Malformed):
            await _abort_malformed(context, "NotifyClientTermination", request)
        return await self._guard(
            "NotifyClientTermination", self._terminate(request, context), codec.termination_response
        )

    async def _terminate(self, request, context):
        group = codec.decode_termination(request)
        self._authorize(context, [group_context(group)] if group else [])
        self._sessions.remove(self._require_client_id(context))
        return codec.termination_response()

    async def Telemetry(self, request_iterator, context):
        client_id = _header(context, CLIENT_ID_HEADER).strip()
        if not client_id:
            # Answer the client's first command (never an unsolicited status: Node would reject its startup).
            async for _ in request_iterator:
                yield codec.telemetry_error(V2StatusCode.CLIENT_ID_REQUIRED, f"header {CLIENT_ID_HEADER} is required")
                return
            return
        try:
            self._authorize(context, [])  # who opens the stream; its settings are checked as they come
        except AccessDeniedError as exc:
            async for _ in request_iterator:
                yield codec.telemetry_error(V2StatusCode.UNAUTHORIZED, str(exc))
                return
            return
        outbox = self._sessions.open_stream(client_id, self._clock.now_ms())
        language = _header(context, LANGUAGE_HEADER)
        reader = asyncio.ensure_future(self._read_telemetry(client_id, language, request_iterator, outbox, context))
        try:
            while (command := await outbox.get()) is not None:
                yield command
            if outbox.said_goodbye:
                # The client cancels its stream right after NotifyClientTermination; a stream the server ends
                # first makes the Python client log "'_EOF' object has no attribute 'HasField'".
                await asyncio.wait([reader], timeout=self.terminated_stream_linger_s)
        finally:
            reader.cancel()
            await asyncio.wait([reader])
            self._sessions.close_stream(client_id, outbox)

    async def _read_telemetry(self, client_id: str, language: str, request_iterator, outbox, context) -> None:
        """Answer each command of the client; the stream's outbox closes when the client stops writing."""
        try:
            async for command in request_iterator:
                reply = self._telemetry_reply(client_id, language, command, context)
                if reply is not None and not outbox.offer(reply):
                    log.warning("event=grpc_telemetry_outbox_full client_id=%s", client_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the client reset the stream, or it broke: end it quietly
            log.debug("event=grpc_telemetry_read_ended client_id=%s error=%r", client_id, exc)
        finally:
            outbox.close()

    def _telemetry_reply(self, client_id: str, language: str, command, context):
        """The server's answer to one client command, or None when it needs none."""
        if isinstance(command, Malformed):
            return codec.telemetry_error(V2StatusCode.BAD_REQUEST, f"malformed telemetry command: {command.reason}")
        try:
            kind = codec.telemetry_kind(command)
            if kind != "settings":
                log.debug("event=grpc_telemetry_ignored client_id=%s kind=%s", client_id, kind or "empty")
                return None
            settings = codec.decode_client_settings(command)
            if settings.client_type not in _KNOWN_CLIENT_TYPES:
                return codec.telemetry_error(
                    V2StatusCode.UNRECOGNIZED_CLIENT_TYPE, f"unrecognized client type {settings.client_type}"
                )
            try:
                self._authorize(context, settings_contexts(settings.is_consumer, settings.group, settings.topics))
            except AccessDeniedError as exc:
                return codec.telemetry_error(V2StatusCode.UNAUTHORIZED, str(exc))
            self._sessions.update_settings(
                client_id,
                self._clock.now_ms(),
                client_type=settings.client_type,
                group=settings.group,
                topics=settings.topics,
            )
            endpoint = metric_endpoint(
                self._broker.config.client_metrics_endpoint,
                client_type=settings.client_type,
                language=language,
                own_grpc_addr=self._broker.grpc_addr,
            )
            return codec.settings_reply(
                command,
                max_body_bytes=self._limits.max_body_bytes,
                metric_endpoint=endpoint,
                **self._consumer_settings(settings.group),
            )
        except Exception:  # one bad command never ends the stream
            log.exception("event=grpc_telemetry_command_failed client_id=%s", client_id)
            return codec.telemetry_error(V2StatusCode.INTERNAL_SERVER_ERROR, "internal error")

    def _consumer_settings(self, group: str | None) -> dict:
        """The group's FIFO flag and max attempts (retry max times + 1), the broker's delay levels as the
        consumers' customized backoff (a push consumer nacks with the level of the message's attempt), and the
        lite limits (broker/lite)."""
        config = self._broker.groups.get(group) if group else None
        retry_max_times = config.retry_max_times if config is not None else -1
        broker_config = self._broker.config
        return {
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
            self._authorize(context, consumer_contexts(*codec.group_and_topic(request)))
        except AccessDeniedError as exc:
            yield codec.receive_status(V2StatusCode.UNAUTHORIZED, str(exc))
            return
        async for response in self._consumers.receive(request, context, _header(context, CLIENT_ID_HEADER).strip()):
            yield response

    async def QueryAssignment(self, request, context):
        client_id = _header(context, CLIENT_ID_HEADER).strip()  # the gray split depends on who asks
        assign = functools.partial(self._consumers.query_assignment, client_id=client_id)
        return await self._consumer_rpc("QueryAssignment", assign, request, context)

    async def AckMessage(self, request, context):
        return await self._consumer_rpc("AckMessage", self._consumers.ack, request, context)

    async def ChangeInvisibleDuration(self, request, context):
        return await self._consumer_rpc("ChangeInvisibleDuration", self._consumers.change_invisible, request, context)

    async def SyncLiteSubscription(self, request, context):
        client_id = _header(context, CLIENT_ID_HEADER).strip()  # subscriptions are per client
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
            self._authorize(context, topic_contexts(topic or "", PUB) if publishes else consumer_contexts(group, topic))
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
            self._authorize(context, consumer_contexts(*codec.group_and_topic(request)))
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
    def _authorize(self, context, contexts) -> None:
        """AccessDeniedError unless the caller may do all of ``contexts`` (nothing checked with access control off)."""
        if self._gate is not None:
            self._gate.check(context.invocation_metadata(), self._peer(context), contexts)

    def _peer(self, context) -> str:
        return self._client_peer(context.peer() or "")

    def _require_started(self) -> None:
        if not self._broker.started:
            raise ServiceNotAvailableError("the broker is starting or stopping")

    @staticmethod
    def _require_client_id(context) -> str:
        client_id = _header(context, CLIENT_ID_HEADER).strip()
        if not client_id:
            raise V2StatusError(V2StatusCode.CLIENT_ID_REQUIRED, f"header {CLIENT_ID_HEADER} is required")
        return client_id

    @staticmethod
    async def _guard(rpc: str, work, on_error):
        """Run one request; its failure becomes its response (``on_error(code, message)``)."""
        try:
            return await work
        except PocketMQError as exc:
            log.debug("event=grpc_request_refused rpc=%s code=%d error=%s", rpc, v2_code_of(exc), exc)
            return on_error(v2_code_of(exc), str(exc))
        except Exception:
            log.exception("event=grpc_request_failed rpc=%s", rpc)
            return on_error(V2StatusCode.INTERNAL_SERVER_ERROR, "internal error")

    def __repr__(self) -> str:
        return f"<MessagingServicer broker={self._broker.broker_name} inflight_sends={self._inflight_sends}>"


async def _abort_malformed(context, rpc: str, request: Malformed) -> None:
    log.debug("event=grpc_malformed_request rpc=%s reason=%s", rpc, request.reason)
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed {rpc} request: {request.reason}")
