"""The admin clients of the console: one per set of credentials, so that with access control on every request
reaches the brokers signed as the user who logged in, and the brokers' own policies decide what that user
may see and do (the console keeps no rights table of its own)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.config import ClientConfig
from pocketmq.common.errors import PocketMQError
from pocketmq.console.errors import Unauthenticated, is_access_refusal, is_unauthenticated

# Credentials that reach no broker still make an admin; a bound on them keeps a password-guessing client from
# filling the console's memory with idle clients.
MAX_ADMINS = 64
# The process shares one client instance (and its signing connections) per instance name: each admin's name is
# its own for the process's life, so that no user's admin is handed another user's instance.
_admin_serials = itertools.count()


class AdminPool:
    def __init__(self, config: ClientConfig):
        self._config = config
        self._admins: dict[tuple[str, str] | None, AsyncAdmin] = {}
        self._lock = asyncio.Lock()

    @property
    def namesrv_addr(self) -> str:
        return self._config.namesrv_addr

    async def admin(self, credentials: tuple[str, str] | None) -> AsyncAdmin:
        """The started admin client signing as ``(access key, secret key)``; for None, as the console's own
        client configuration says (unsigned, or its ``--access-key``)."""
        admin = self._admins.get(credentials)
        if admin is not None:
            return admin
        async with self._lock:
            admin = self._admins.get(credentials)
            if admin is None:
                if len(self._admins) >= MAX_ADMINS:
                    await self._drop_oldest()
                config = dataclasses.replace(
                    self._config, instance_name=f"{self._config.instance_name}-{next(_admin_serials)}"
                )
                if credentials is not None:
                    config = dataclasses.replace(config, access_key=credentials[0], secret_key=credentials[1])
                admin = AsyncAdmin(config)
                await admin.start()
                try:
                    if credentials is not None:
                        await _check_login(admin, credentials[0])
                except BaseException:
                    await admin.shutdown()
                    raise
                self._admins[credentials] = admin
            return admin

    async def _drop_oldest(self) -> None:
        oldest = next(iter(self._admins))
        await self._admins.pop(oldest).shutdown()

    async def close(self) -> None:
        admins, self._admins = list(self._admins.values()), {}
        for admin in admins:
            await admin.shutdown()


async def _check_login(admin: AsyncAdmin, user: str) -> None:
    """Unauthenticated unless a broker takes ``admin``'s signature: the console's answers that gather what
    they can (one row per broker, an error where a broker refused) must not pass for a login. A refusal for
    want of a policy means the user is known: logged in, with the rights the brokers give."""
    masters = await admin.master_addrs()
    if not masters:
        return  # no broker to ask yet: each request is still checked by the brokers it reaches
    try:
        await admin.runtime_info(masters[min(masters)])
    except PocketMQError as exc:
        if is_unauthenticated(exc):
            raise Unauthenticated(f"user {user!r} not logged in: {exc}") from None
        if not is_access_refusal(exc):
            raise
