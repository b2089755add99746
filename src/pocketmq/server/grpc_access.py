"""Access control at the gRPC port (docs/security.md): who is calling, and may they do what the RPC does.

Authentication reads the metadata the official clients send: ``authorization: MQv2-HMAC-SHA1 Credential=<ak>,
SignedHeaders=x-mq-date-time, Signature=<hex>``, the HMAC-SHA1 of the ``x-mq-date-time`` value under the user's
secret (``auth.signature``). With access control off the header is ignored (the official Python client always
sends one, with an empty credential when it has none). A Telemetry stream is checked as it opens.

Authorization per RPC (RocketMQ's proxy): SendMessage and EndTransaction need Pub on the topic, QueryRoute Pub or
Sub on it; ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue and
QueryAssignment need Sub on the group and on the topic, and so do PullMessage and the offset RPCs (RocketMQ checks only who calls
those); RecallMessage needs Pub on the topic; a consumer's Heartbeat and NotifyClientTermination Sub on
its group; Telemetry's settings Pub on each topic a producer publishes, Sub on a consumer's group and topics.

A refusal is an AccessDeniedError, which the servicer turns into the RPC's response with status UNAUTHORIZED
(40100) and RocketMQ's message (a TelemetryCommand status on the stream); it is counted like any other.
Decisions are remembered per (user, address, resource, actions) until the users or ACLs change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.auth.decide import parse_address
from pocketmq.auth.model import User
from pocketmq.auth.signature import (
    GRPC_AUTHORIZATION_KEY,
    GRPC_DATE_TIME_KEY,
    grpc_signature_matches,
    parse_grpc_authorization,
)
from pocketmq.server.access_contexts import PUB, SUB, Context, group_context, topic_contexts

if TYPE_CHECKING:
    from pocketmq.broker.access import AccessChecks

PROTOCOL = "grpc"
PUB_OR_SUB = PUB | SUB
_MAX_REMEMBERED = 16_384


class GrpcAccessGate:
    def __init__(self, access: AccessChecks):
        self._access = access
        self._version = -1
        self._allowed: set[tuple] = set()

    def check(self, metadata, peer: str, contexts: list[Context]) -> None:
        """Return when the caller of these ``metadata`` may do all of ``contexts``; AccessDeniedError else."""
        access = self._access
        headers = dict(metadata or ())
        credential = parse_grpc_authorization(headers.get(GRPC_AUTHORIZATION_KEY, ""))
        date_time = headers.get(GRPC_DATE_TIME_KEY, "")

        def signature_matches(user: User) -> bool:
            return credential is not None and grpc_signature_matches(user.password, date_time, credential)

        user = access.authenticate(credential.access_key if credential else None, signature_matches, PROTOCOL)
        if not access.authorization_enabled or user.is_super:
            return
        if self._version != access.table.version or len(self._allowed) >= _MAX_REMEMBERED:
            self._version, self._allowed = access.table.version, set()
        _, _, host = peer.partition(":")  # ipv4:1.2.3.4:5 / ipv6:[::1]:5
        host = host.rsplit(":", 1)[0]
        for context in contexts:
            key = (user.username, host, *context)
            if key not in self._allowed:
                access.authorize(user, (context,), parse_address(host), PROTOCOL)
                self._allowed.add(key)


def access_key_of(metadata) -> str | None:
    """The user a call's ``authorization`` metadata names (None when it names none or does not parse)."""
    credential = parse_grpc_authorization(dict(metadata or ()).get(GRPC_AUTHORIZATION_KEY, ""))
    return credential.access_key if credential else None


def unary_contexts(group: str | None, topic: str | None, *, publishes: bool) -> list[Context]:
    """What a unary RPC about a group and topic needs: Pub on the topic when it ends a producer's work
    (EndTransaction, RecallMessage), else a consumer's rights (``consumer_contexts``)."""
    return topic_contexts(topic or "", PUB) if publishes else consumer_contexts(group, topic)


def consumer_contexts(group: str | None, topic: str | None) -> list[Context]:
    found = [group_context(group)] if group else []  # QueryOffset names no group
    if topic:
        found.extend(topic_contexts(topic, SUB))
    return found


def settings_contexts(is_consumer: bool, group: str | None, topics: tuple[str, ...]) -> list[Context]:
    if not is_consumer:
        return [context for topic in topics for context in topic_contexts(topic, PUB)]
    return [group_context(group or ""), *(context for topic in topics for context in topic_contexts(topic, SUB))]
