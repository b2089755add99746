"""The brokers' users and ACLs as the proxy checks its clients against them (docs/grpc.md, "Proxy").

Read with AUTH_LIST_USER (``withSecret``: the proxy checks signatures, so its own user must be Super) and
AUTH_LIST_ACL from one master (the admin client's: the first by broker name; masters hold the same users when
they are managed cluster-wide, as ``pocketmq acl`` does). ``refresh(username)`` runs before each call
(proxy/access.py): the table is read again when it is ``ttl_ms`` old, and at once for a user it does not know (a
user created a moment ago), at most once per ``unknown_gap_ms`` so calls naming made-up users cannot flood the
brokers: such a call waits for the next read rather than being refused on an old one.

``user`` and ``acl`` are the ``UserSource`` the checks read (broker/access.py); ``version`` changes when a read
finds a change, so decisions remembered under the old table are forgotten. When the brokers cannot be read the
last table read is kept (an empty one before any read: every call refused) and a warning logged.
"""

from __future__ import annotations

import asyncio
import logging

from pocketmq.auth.model import Acl, User
from pocketmq.client.admin import AsyncAdmin
from pocketmq.common.errors import PocketMQError
from pocketmq.protocol.codes import AUTH_LIST_ACL, AUTH_LIST_USER
from pocketmq.protocol.request_headers import ListUsersRequestHeader
from pocketmq.runtime.clock import Clock

log = logging.getLogger(__name__)

DEFAULT_UNKNOWN_GAP_MS = 200


class BrokerUsers:
    def __init__(self, admin: AsyncAdmin, clock: Clock, ttl_ms: int, unknown_gap_ms: int = DEFAULT_UNKNOWN_GAP_MS):
        self.version = 0
        self._admin = admin
        self._clock = clock
        self._ttl_ms = ttl_ms
        self._unknown_gap_ms = unknown_gap_ms
        self._users: dict[str, User] = {}
        self._acls: dict[str, Acl] = {}
        self._read_at_ms: float | None = None  # monotonic: when the last read began
        self._reads_begun = 0
        self._lock = asyncio.Lock()

    def user(self, username: str) -> User | None:
        return self._users.get(username)

    def acl(self, subject: str) -> Acl | None:
        return self._acls.get(subject)

    async def refresh(self, username: str | None) -> None:
        """Read the table again when it is old, or when it does not know ``username``."""
        reads_before = self._reads_begun
        unknown = bool(username) and username not in self._users
        if not unknown and not self._older_than(self._ttl_ms, self._clock.monotonic_ms()):
            return
        async with self._lock:
            if self._reads_begun > reads_before:
                return  # a read begun since this call came has answered it
            if unknown:
                await self._after_gap()
            elif not self._older_than(self._ttl_ms, self._clock.monotonic_ms()):
                return
            await self._read()

    def _older_than(self, age_ms: float, now_ms: float) -> bool:
        return self._read_at_ms is None or now_ms - self._read_at_ms >= age_ms

    async def _after_gap(self) -> None:
        if self._read_at_ms is None:
            return
        wait_ms = self._read_at_ms + self._unknown_gap_ms - self._clock.monotonic_ms()
        if wait_ms > 0:
            gap_over: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def end_gap() -> None:
                if not gap_over.done():  # not when the waiting call was cancelled
                    gap_over.set_result(None)

            self._clock.call_later_ms(wait_ms, end_gap)
            await gap_over

    async def _read(self) -> None:
        self._read_at_ms = self._clock.monotonic_ms()
        self._reads_begun += 1
        try:
            users_json = await self._admin.auth_read(
                AUTH_LIST_USER, ListUsersRequestHeader.ext_fields(with_secret=True)
            )
            acls_json = await self._admin.auth_read(AUTH_LIST_ACL, {})
            users = {user.username: user for user in map(User.from_json, users_json or [])}
            acls = {acl.subject: acl for acl in map(Acl.from_json, acls_json or [])}
        except PocketMQError as exc:
            log.warning("event=proxy_users_unread error=%s", exc)
            return
        if users != self._users or acls != self._acls:
            self._users, self._acls = users, acls
            self.version += 1
            log.info("event=proxy_users_read users=%d acls=%d version=%d", len(users), len(acls), self.version)

    def __repr__(self) -> str:
        return f"<BrokerUsers users={len(self._users)} acls={len(self._acls)} version={self.version}>"
