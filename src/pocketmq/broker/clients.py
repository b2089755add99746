"""Which clients of a group are alive: the pure table under the producer and consumer registries.

A client is known by its client id within a group, with the connection it last heart-beat on (any object;
the front end that owns it knows how to talk to it). It leaves on unregister, when its connection closes,
or when it has not heart-beaten for ``expire_ms``. No clock in here: callers pass ``now_ms``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class ClientChannel:
    client_id: str
    connection: object
    last_heartbeat_ms: int
    language: str = "JAVA"
    version: int = 0
    remote_address: str = ""


class ClientTable:
    """group -> client id -> ClientChannel."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, ClientChannel]] = {}

    def touch(self, group: str, channel: ClientChannel) -> bool:
        """Record a heartbeat; returns True when the client id is new to the group."""
        members = self._groups.setdefault(group, {})
        joined = channel.client_id not in members
        members[channel.client_id] = channel
        return joined

    def remove(self, group: str, client_id: str) -> bool:
        members = self._groups.get(group)
        if not members or members.pop(client_id, None) is None:
            return False
        if not members:
            del self._groups[group]
        return True

    def remove_connection(self, connection: object) -> list[str]:
        """Drop every client that used ``connection``; returns the groups that lost a member."""
        return self._remove_where(lambda ch: ch.connection is connection)

    def expire(self, now_ms: int, expire_ms: int) -> list[str]:
        """Drop clients silent for more than ``expire_ms``; returns the groups that lost a member."""
        return self._remove_where(lambda ch: now_ms - ch.last_heartbeat_ms > expire_ms)

    def _remove_where(self, predicate) -> list[str]:
        changed = []
        for group, members in list(self._groups.items()):
            gone = [cid for cid, ch in members.items() if predicate(ch)]
            for cid in gone:
                del members[cid]
            if gone:
                changed.append(group)
            if not members:
                del self._groups[group]
        return changed

    def clients(self, group: str) -> list[ClientChannel]:
        return list(self._groups.get(group, {}).values())

    def client_ids(self, group: str) -> list[str]:
        return sorted(self._groups.get(group, {}))

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def find(self, group: str, client_id: str) -> ClientChannel | None:
        return self._groups.get(group, {}).get(client_id)

    def __len__(self) -> int:
        return sum(len(m) for m in self._groups.values())

    def __repr__(self) -> str:
        return f"<ClientTable groups={len(self._groups)} clients={len(self)}>"
