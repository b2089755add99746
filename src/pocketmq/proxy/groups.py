"""Consumer groups' settings as the brokers hold them (FIFO flag, retry max times), for Settings replies and
FIFO receives: read with GET_ALL_SUBSCRIPTIONGROUP_CONFIG from every master and kept ``ttl_ms``.

A group the brokers do not know (auto-created on its first pop) has the defaults: not FIFO, 16 retries. When
the brokers cannot be asked the last table read is kept (and an empty one before any read), so a Settings
reply never waits for a broker that is away.
"""

from __future__ import annotations

import asyncio
import logging

from pocketmq.client.admin import AsyncAdmin, GroupConfig
from pocketmq.common.errors import PocketMQError
from pocketmq.runtime.clock import Clock

log = logging.getLogger(__name__)


class GroupSettings:
    def __init__(self, admin: AsyncAdmin, clock: Clock, ttl_ms: int):
        self._admin = admin
        self._clock = clock
        self._ttl_ms = ttl_ms
        self._groups: dict[str, GroupConfig] = {}
        self._read_at_ms: float | None = None  # monotonic
        self._lock = asyncio.Lock()

    async def get(self, group: str) -> GroupConfig | None:
        async with self._lock:
            now_ms = self._clock.monotonic_ms()
            if self._read_at_ms is None or now_ms - self._read_at_ms >= self._ttl_ms:
                self._read_at_ms = now_ms
                try:
                    self._groups = await self._admin.list_groups()
                except PocketMQError as exc:
                    log.warning("event=proxy_group_settings_unread error=%s", exc)
        return self._groups.get(group)

    async def is_fifo(self, group: str) -> bool:
        config = await self.get(group)
        return bool(config is not None and config.consume_message_orderly)
