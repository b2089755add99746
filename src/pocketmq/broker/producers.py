"""Producers of each producer group, learned from heartbeats (the transaction check-back asks one of them)."""

from __future__ import annotations

import logging

from pocketmq.broker.clients import ClientChannel, ClientTable
from pocketmq.runtime.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)


class ProducerRegistry:
    def __init__(self, expire_ms: int, *, clock: Clock = SYSTEM_CLOCK):
        self._table = ClientTable()
        self._expire_ms = expire_ms
        self._clock = clock

    def heartbeat(
        self,
        group: str,
        client_id: str,
        connection: object,
        *,
        language: str = "JAVA",
        version: int = 0,
        remote_address: str = "",
    ) -> None:
        channel = ClientChannel(client_id, connection, self._clock.now_ms(), language, version, remote_address)
        if self._table.touch(group, channel):
            log.info("event=producer_joined group=%s client=%s", group, client_id)

    def unregister(self, group: str, client_id: str) -> None:
        self._table.remove(group, client_id)

    def connection_closed(self, connection: object) -> None:
        self._table.remove_connection(connection)

    def expire(self) -> None:
        self._table.expire(self._clock.now_ms(), self._expire_ms)

    def clients(self, group: str) -> list[ClientChannel]:
        return self._table.clients(group)

    def groups(self) -> list[str]:
        return self._table.groups()

    def __repr__(self) -> str:
        return f"<ProducerRegistry {self._table!r}>"
