"""Access control at the broker's remoting port: one check of every request before it is dispatched.

Authentication: the ``AccessKey`` field names the user, and ``Signature`` must be the HMAC-SHA1 of the request
under that user's secret (``auth.signature``). Each request carries its own signature over its own fields and
body, so each is checked: nothing of it can be reused from the previous one. Authorization: the request's
(resource, actions) pairs (``access_contexts``) must all be allowed.

A refused request is answered NO_PERMISSION (16) with RocketMQ's remark and is not dispatched: it changes
nothing. A oneway one gets no answer, as in RocketMQ.

Per connection, the decisions already made are remembered (who may do what on which resource) until the users
or ACLs change: a producer sending to one topic pays for the policy walk once, then a set lookup per request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.auth.decide import Address, parse_address
from pocketmq.auth.model import User
from pocketmq.auth.signature import ACCESS_KEY_FIELD, remoting_signature_matches
from pocketmq.common.errors import AccessDeniedError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.transport import RemotingConnection
from pocketmq.server.access_contexts import request_contexts

if TYPE_CHECKING:
    from pocketmq.broker.access import AccessControl

PROTOCOL = "remoting"
_STATE = "pocketmq.access"
_UNIQUE_KEY_FIELD = "_UNIQUE_KEY_QUERY"
_UNIQUE_KEY_UNSIGNED_UP_TO_VERSION = 399  # 4.9.3 and older clients did not sign it (RocketMQ's exception)
_MAX_REMEMBERED = 4_096  # decisions per connection; past this the set starts again


class _ConnectionState:
    __slots__ = ("version", "address", "allowed")

    def __init__(self, version: int, address: Address | None):
        self.version = version  # of the auth table the decisions were made under
        self.address = address
        self.allowed: set[tuple] = set()  # (username, resource, actions) found allowed


class RemotingAccessGate:
    def __init__(self, access: AccessControl, cluster_name: str):
        self._access = access
        self._cluster_name = cluster_name

    def refusal(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        """NO_PERMISSION's reply when ``request`` may not be served, else None."""
        access = self._access
        state = conn.attributes.get(_STATE)
        if not isinstance(state, _ConnectionState) or state.version != access.table.version:
            state = _ConnectionState(access.table.version, parse_address(conn.remote_host))
            conn.attributes[_STATE] = state
        try:
            fields = request.ext_fields
            user = access.authenticate(fields.get(ACCESS_KEY_FIELD), lambda u: _signature_matches(u, request), PROTOCOL)
            if access.authorization_enabled:
                self._authorize(state, user, request)
        except AccessDeniedError as exc:
            return request.response(ResponseCode.NO_PERMISSION, remark=str(exc))
        return None

    def _authorize(self, state: _ConnectionState, user: User, request: RemotingCommand) -> None:
        if user.is_super:
            return
        allowed = state.allowed
        for context in request_contexts(request, self._cluster_name):
            key = (user.username, *context)
            if key in allowed:
                continue
            self._access.authorize(user, (context,), state.address, PROTOCOL)
            if len(allowed) >= _MAX_REMEMBERED:
                allowed.clear()
            allowed.add(key)


def _signature_matches(user: User, request: RemotingCommand) -> bool:
    exclude: tuple[str, ...] = ()
    if request.code == RequestCode.QUERY_MESSAGE and request.version <= _UNIQUE_KEY_UNSIGNED_UP_TO_VERSION:
        exclude = (_UNIQUE_KEY_FIELD,)
    return remoting_signature_matches(user.password, request.ext_fields, request.body, exclude=exclude)
