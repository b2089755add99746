"""The v2 client-session RPCs, shared by the embedded front end and the proxy: Heartbeat, Telemetry and
NotifyClientTermination over a ``SessionRegistry``.

Both serve them alike; what differs is what a Settings reply says (the body limit, the consumer group's FIFO
flag and retries, the metrics endpoint) and who may do what (access control, docs/security.md), which each asks
of its ``SessionPolicy``: the embedded front end answers from its broker, the proxy from the brokers over
remoting (and checks no access).

Telemetry: each stream is registered in the session registry under the ``x-mq-client-id`` header; what the
server sends on it (settings replies, transaction checks) goes through the session's outbox, so any part of
the server can push a command to a live client with ``sessions.get(client_id).push(cmd)``. The stream ends
when the client half-closes it, when the session is dropped (heartbeat expiry) or when a newer stream of the
same client replaces it. After NotifyClientTermination it waits (up to ``TERMINATED_STREAM_LINGER_S``) for the
client to end it, as the clients do right after.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from pocketmq.common.errors import AccessDeniedError
from pocketmq.protocol import grpc_codec as codec
from pocketmq.protocol.codes import V2StatusCode
from pocketmq.protocol.grpc_codec import ClientSettings
from pocketmq.protocol.grpc_service import Malformed
from pocketmq.runtime.clock import Clock
from pocketmq.server.access_contexts import group_context
from pocketmq.server.grpc_access import settings_contexts
from pocketmq.server.grpc_calls import (
    CLIENT_ID_HEADER,
    LANGUAGE_HEADER,
    abort_malformed,
    client_id_of,
    guard,
    header,
    require_client_id,
)
from pocketmq.server.sessions import SessionRegistry

log = logging.getLogger(__name__)

TERMINATED_STREAM_LINGER_S = 3.0  # how long a terminated client's stream waits for the client to end it
# A goodbye answers once the receives the client left open have (they end at once), or after this long.
TERMINATION_RECEIVES_WAIT_S = 1.0
# The client kinds the v2 protocol defines; a Settings with another one is UNRECOGNIZED_CLIENT_TYPE.
KNOWN_CLIENT_TYPES = frozenset(
    {"PRODUCER", "PUSH_CONSUMER", "SIMPLE_CONSUMER", "PULL_CONSUMER", "LITE_PUSH_CONSUMER", "LITE_SIMPLE_CONSUMER"}
)


class SessionPolicy(Protocol):
    def authorize(self, context, contexts) -> None:
        """AccessDeniedError unless the caller of ``context`` may do all of ``contexts``."""
        ...

    async def settings_reply_args(self, settings: ClientSettings, language: str) -> dict:
        """The keyword arguments of ``grpc_codec.settings_reply`` for a client that announced ``settings``."""
        ...

    def client_address(self, context) -> str:
        """``host:port`` of the client of ``context`` as admin listings show it."""
        ...


class ClientRpcs:
    def __init__(self, sessions: SessionRegistry, clock: Clock, policy: SessionPolicy):
        self._sessions = sessions
        self._clock = clock
        self._policy = policy
        self.terminated_stream_linger_s = TERMINATED_STREAM_LINGER_S

    async def heartbeat(self, request, context):
        if isinstance(request, Malformed):
            await abort_malformed(context, "Heartbeat", request)
        return await guard("Heartbeat", self._heartbeat(request, context), codec.heartbeat_response)

    async def _heartbeat(self, request, context):
        client_id = require_client_id(context)
        client_type, group = codec.decode_heartbeat(request)
        self._policy.authorize(context, [group_context(group)] if group else [])
        self._sessions.heartbeat(
            client_id,
            self._clock.now_ms(),
            client_type=client_type,
            group=group,
            language=header(context, LANGUAGE_HEADER),
        )
        return codec.heartbeat_response()

    async def terminate(self, request, context):
        if isinstance(request, Malformed):
            await abort_malformed(context, "NotifyClientTermination", request)
        return await guard("NotifyClientTermination", self._terminate(request, context), codec.termination_response)

    async def _terminate(self, request, context):
        group = codec.decode_termination(request)
        self._policy.authorize(context, [group_context(group)] if group else [])
        session = self._sessions.remove(require_client_id(context))
        if session is not None:
            await session.receives_closed(TERMINATION_RECEIVES_WAIT_S)
        return codec.termination_response()

    async def telemetry(self, request_iterator, context):
        client_id = client_id_of(context)
        if not client_id:
            # Answer the client's first command (never an unsolicited status: Node would reject its startup).
            async for _ in request_iterator:
                yield codec.telemetry_error(V2StatusCode.CLIENT_ID_REQUIRED, f"header {CLIENT_ID_HEADER} is required")
                return
            return
        try:
            self._policy.authorize(context, [])  # who opens the stream; its settings are checked as they come
        except AccessDeniedError as exc:
            async for _ in request_iterator:
                yield codec.telemetry_error(V2StatusCode.UNAUTHORIZED, str(exc))
                return
            return
        outbox = self._sessions.open_stream(client_id, self._clock.now_ms())
        language = header(context, LANGUAGE_HEADER)
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
                reply = await self._telemetry_reply(client_id, language, command, context)
                if reply is not None and not outbox.offer(reply):
                    log.warning("event=grpc_telemetry_outbox_full client_id=%s", client_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the client reset the stream, or it broke: end it quietly
            log.debug("event=grpc_telemetry_read_ended client_id=%s error=%r", client_id, exc)
        finally:
            outbox.close()

    async def _telemetry_reply(self, client_id: str, language: str, command, context):
        """The server's answer to one client command, or None when it needs none."""
        if isinstance(command, Malformed):
            return codec.telemetry_error(V2StatusCode.BAD_REQUEST, f"malformed telemetry command: {command.reason}")
        try:
            kind = codec.telemetry_kind(command)
            if kind != "settings":
                log.debug("event=grpc_telemetry_ignored client_id=%s kind=%s", client_id, kind or "empty")
                return None
            settings = codec.decode_client_settings(command)
            if settings.client_type not in KNOWN_CLIENT_TYPES:
                return codec.telemetry_error(
                    V2StatusCode.UNRECOGNIZED_CLIENT_TYPE, f"unrecognized client type {settings.client_type}"
                )
            try:
                self._policy.authorize(
                    context, settings_contexts(settings.is_consumer, settings.group, settings.topics)
                )
            except AccessDeniedError as exc:
                return codec.telemetry_error(V2StatusCode.UNAUTHORIZED, str(exc))
            self._sessions.update_settings(
                client_id, self._clock.now_ms(), settings, self._policy.client_address(context)
            )
            return codec.settings_reply(command, **await self._policy.settings_reply_args(settings, language))
        except Exception:  # one bad command never ends the stream
            log.exception("event=grpc_telemetry_command_failed client_id=%s", client_id)
            return codec.telemetry_error(V2StatusCode.INTERNAL_SERVER_ERROR, "internal error")
