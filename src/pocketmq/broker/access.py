"""The broker's access control (docs/security.md): its settings, its users and ACLs, and the count of denials.

Both front ends ask it the same two questions: who is this (``authenticate``, given the user a request names and
how to check its signature with that user's secret) and may they (``authorize``, for each resource and the
actions the request needs there). A refusal raises AccessDeniedError with RocketMQ's words, is counted in
``pocketmq_access_denied_total{user, resource}`` and logged (rate-limited, never with a secret); the request
then changes nothing.

With authorization on and authentication off, the user a request names is taken at its word (RocketMQ does the
same): only a setup for trying policies out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import NoReturn, Protocol

from pocketmq.auth import decide
from pocketmq.auth.decide import Address
from pocketmq.auth.model import Acl, Action, Resource, User, UserType
from pocketmq.broker.auth_table import AuthTable
from pocketmq.broker.config import BrokerConfig
from pocketmq.common.errors import AccessDeniedError
from pocketmq.metrics.registry import MetricsRegistry
from pocketmq.runtime.rate_limited_log import RateLimitedLog

log = logging.getLogger(__name__)
METRIC_DENIED = "pocketmq_access_denied_total"
DENIED_LOG_INTERVAL_S = 10.0  # one line per user and protocol per interval: a flood of refusals stays readable
_ANONYMOUS = User("", "-", UserType.NORMAL)  # who a request is with authentication and authorization off


class UserSource(Protocol):
    """Where the users and ACLs come from: the broker's own table, or the proxy's copy of the brokers' one."""

    version: int  # changes whenever the users or ACLs do (decisions remembered under another version are stale)

    def user(self, username: str) -> User | None: ...

    def acl(self, subject: str) -> Acl | None: ...


class AccessChecks:
    """Authentication and authorization under the two switches, over any ``UserSource`` (the proxy's too)."""

    def __init__(
        self, table: UserSource, metrics: MetricsRegistry, *, authentication_enabled: bool, authorization_enabled: bool
    ):
        self.authentication_enabled = authentication_enabled
        self.authorization_enabled = authorization_enabled
        self.enabled = authentication_enabled or authorization_enabled
        self.table = table
        self._denied = metrics.counter(
            METRIC_DENIED, "requests refused by access control", ("user", "resource", "protocol")
        )
        self._denied_log = RateLimitedLog(log, DENIED_LOG_INTERVAL_S)

    def authenticate(self, username: str | None, signature_matches: Callable[[User], bool], protocol: str) -> User:
        """The user a request is from (AccessDeniedError when it cannot be); with authentication off, the user it
        names (looked up for authorization) without checking anything."""
        if not self.authentication_enabled:
            user = self.table.user(username) if username else None
            if user is None and self.authorization_enabled:
                self.deny(username or "", "-", protocol, AccessDeniedError(f"User:{username} is not found."))
            return user or _ANONYMOUS
        try:
            return decide.authenticate(username, self.table.user(username or ""), signature_matches)
        except AccessDeniedError as exc:
            self.deny(username or "", "-", protocol, exc)

    def authorize(
        self,
        user: User,
        contexts: Iterable[tuple[Resource, frozenset[Action]]],
        address: Address | None,
        protocol: str,
    ) -> None:
        if not self.authorization_enabled:
            return
        for resource, actions in contexts:
            try:
                decide.authorize(user, self.table.acl(user.subject), resource, actions, address)
            except AccessDeniedError as exc:
                self.deny(user.username, str(resource), protocol, exc)

    def deny(self, username: str, resource: str, protocol: str, exc: AccessDeniedError) -> NoReturn:
        """Count and log a refusal, and raise it."""
        self._denied.inc(user=username or "-", resource=resource, protocol=protocol)
        self._denied_log.warning(
            f"{protocol}/{username}",
            "event=access_denied protocol=%s user=%s reason=%s",
            protocol,
            username or "-",
            exc,
        )
        raise exc


class AccessControl(AccessChecks):
    """The broker's: its switches, and its own users and ACLs (``AuthTable``)."""

    table: AuthTable

    def __init__(self, config: BrokerConfig, metrics: MetricsRegistry):
        super().__init__(
            AuthTable(config.data_dir),
            metrics,
            authentication_enabled=config.authentication_enabled,
            authorization_enabled=config.authorization_enabled,
        )
        self._config = config

    def bootstrap(self) -> None:
        """Create the configured Super users that are missing: the bootstrap user and the cluster's inner one."""
        config = self._config
        for username, password in (
            (config.acl_root_user, config.acl_root_password),
            (config.inner_access_key, config.inner_secret_key),
        ):
            if username and password and self.table.ensure_super_user(username, password):
                log.info("event=acl_super_user_created user=%s", username)
