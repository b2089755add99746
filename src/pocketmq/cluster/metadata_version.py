"""A master's metadata version: which state of its topics, groups, FIFO POP acks and users a slave holds.

A master names its version in every HA_PULL_COMMIT_LOG reply; a slave names the version of the last snapshot
it applied in every pull (``appliedMetadataVersion``), which is how a SYNC master knows a FIFO ack reached a
slave (docs/ha.md, "POP acks under SYNC replication"). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MetadataVersion:
    """A master's metadata version: its boot time (``incarnation``, which tells a restarted master's counters
    from the ones before) and the change counters of its topic table, group table and FIFO POP state (only
    acks and changes of invisible time count there: what a SYNC master promises, see docs/ha.md) and of its
    users and ACLs (so that a change of them reaches the slaves with the next pull reply, not the next periodic
    sync). Each counter only grows while the master lives."""

    incarnation: int
    topics: int
    groups: int
    fifo: int = 0
    auth: int = 0

    def __str__(self) -> str:
        return f"{self.incarnation}.{self.topics}.{self.groups}.{self.fifo}.{self.auth}"

    @classmethod
    def parse(cls, text: str | None) -> MetadataVersion | None:
        """The version of ``str(version)``; a master of an older PocketMQ names three or four counters (no FIFO
        or no users one). None when absent or not a version."""
        parts = (text or "").split(".")
        if len(parts) not in (3, 4, 5) or not all(p.isascii() and p.isdigit() for p in parts):
            return None
        return cls(*(int(p) for p in parts))

    def reaches(self, needed: MetadataVersion) -> bool:
        """Whether a slave that applied this version holds everything of ``needed``: the same incarnation and
        no counter behind (at least, not equal: the master may have changed again since)."""
        return (
            self.incarnation == needed.incarnation
            and self.topics >= needed.topics
            and self.groups >= needed.groups
            and self.fifo >= needed.fifo
            and self.auth >= needed.auth
        )
