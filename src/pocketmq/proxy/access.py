"""Access control at the proxy (docs/grpc.md, "Proxy"; docs/security.md): the embedded front end's checks
(server/grpc_access.py's gate over broker/access.py's ``AccessChecks``) over the brokers' users and ACLs as
proxy/users.py reads them.

The checks are synchronous (they run inside the servicer's RPCs, as on a broker); what may need a read from the
brokers runs before them: a server interceptor refreshes the users for the user each call names, so a call from
a user created a moment ago, or after the table's time to live, is checked against what the brokers hold now.
Refusals are logged as on a broker (rate-limited, never with a secret); the proxy exports no metrics.
"""

from __future__ import annotations

import grpc

from pocketmq.broker.access import AccessChecks
from pocketmq.metrics.registry import MetricsRegistry
from pocketmq.proxy.users import BrokerUsers
from pocketmq.server.grpc_access import GrpcAccessGate, access_key_of


class UsersRefresher(grpc.aio.ServerInterceptor):
    """Before each call: the users read again when old, or when they do not know the one the call names."""

    def __init__(self, users: BrokerUsers):
        self._users = users

    async def intercept_service(self, continuation, handler_call_details):
        await self._users.refresh(access_key_of(handler_call_details.invocation_metadata))
        return await continuation(handler_call_details)


def proxy_gate(users: BrokerUsers, *, authentication_enabled: bool, authorization_enabled: bool) -> GrpcAccessGate:
    checks = AccessChecks(
        users,
        MetricsRegistry(),
        authentication_enabled=authentication_enabled,
        authorization_enabled=authorization_enabled,
    )
    return GrpcAccessGate(checks)
