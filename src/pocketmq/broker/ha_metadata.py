"""Metadata a slave copies from its master (HA_SYNC_METADATA): topics, subscription groups, consumer offsets,
and the service state of ``broker.ha_services`` (stage offsets, FIFO POP state, staged-POP registrations,
timer progress).

Snapshot body (JSON)::

    {"topics": [TopicConfig JSON, ...], "groups": [SubscriptionGroupConfig JSON, ...],
     "offsets": {"topic@group": {"queueId": queue offset}},
     "version": the master's metadata version (below), "physOffset": the master's commit log end,
     "stageOffsets": ..., "popFifo": ..., "popStages": ..., "timer": ...,   # ha_services; absent before
     "auth": the master's users and ACLs (broker/auth_table.py; absent from older masters)}

Applying it makes the slave's topic and group tables equal to the master's (creating, updating, deleting;
deleting a topic here drops only its config: its records come and go with the replicated commit log).
Offsets only move forward, so a consumer that committed on the slave while its master was down keeps its
progress when the master, with older offsets, is followed again. The service state is applied by an
``ha_services.ServiceStateFollower`` (see there). Everything is parsed before anything changes.

**Metadata travels with the records** (docs/ha.md, "Metadata"). The master names its *metadata version*
(``MetadataVersion``: its boot and the change counters of its topic and group tables and of its FIFO POP
state's acks) in every HA_PULL_COMMIT_LOG reply; a slave that applied another version syncs the metadata
*before* it appends the records of that reply, so the offset it asks for next (its ack, which releases SYNC
sends) covers a record only once the slave also has the topic and group configs that existed when the record
was stored. A topic created just before a send is on the slave before the send is acknowledged; the periodic
sync remains for the rest (offsets, service state) and as a backstop.

**FIFO acks wait for a snapshot** (docs/ha.md, "POP acks under SYNC replication"): a FIFO ack writes no
record, so the slave names the version it applied in each pull (``appliedMetadataVersion``) and a SYNC
master answers a FIFO ack once a slave reports a version that ``reaches`` the one the ack made
(``cluster.ha_master.HaMaster.metadata_replicated``).

**Offsets wait for their records** (``OffsetsGate``): the master takes the snapshot's offsets from memory,
where a pop has moved its offset once its CK was stored, possibly before the slave has that CK. A slave that
took such an offset and then lost its master would never hand those messages out again, and hold no CK to
revive them: so a snapshot's offsets are applied only once the slave's commit log reaches the ``physOffset``
the snapshot came with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pocketmq.broker.groups import group_config_from_json, group_config_to_json
from pocketmq.broker.ha_services import (
    ServiceStateChanges,
    ServiceStateFollower,
    ServiceTables,
    parse_service_state,
    service_state_snapshot,
)
from pocketmq.broker.topics import topic_config_from_json, topic_config_to_json
from pocketmq.cluster.metadata_version import MetadataVersion
from pocketmq.common.errors import PocketMQError

_KEY_SEPARATOR = "@"


@dataclass(frozen=True, slots=True)
class MetadataChanges:
    topics_changed: int
    topics_deleted: int
    groups_changed: int
    groups_deleted: int
    offsets_moved: int
    services: ServiceStateChanges = ServiceStateChanges()
    version: str | None = None  # the master's metadata version of the snapshot (None from an older master)

    @property
    def any(self) -> bool:
        return any(
            (
                self.topics_changed,
                self.topics_deleted,
                self.groups_changed,
                self.groups_deleted,
                self.offsets_moved,
                self.services.any,
            )
        )


def metadata_version(incarnation: int, topics, groups, fifo_version: int = 0, auth_version: int = 0) -> MetadataVersion:
    """What a master's topic and group tables, FIFO POP acks and users are now: equal versions, equal tables."""
    return MetadataVersion(incarnation, topics.data_version, groups.data_version, fifo_version, auth_version)


def metadata_snapshot(
    topics,
    groups,
    offsets,
    services: ServiceTables = ServiceTables(),
    *,
    version: str | None = None,
    phys_offset: int | None = None,
    auth: dict | None = None,
) -> bytes:
    """The master's snapshot; ``phys_offset``: its commit log end now (every CK behind an offset is below it)."""
    snapshot = {
        "topics": [topic_config_to_json(c) for c in topics.all()],
        "groups": [group_config_to_json(g) for g in groups.all()],
        "offsets": offsets.snapshot(),
        **service_state_snapshot(services),
    }
    if version is not None:
        snapshot["version"] = version
    if phys_offset is not None:
        snapshot["physOffset"] = phys_offset
    if auth is not None:
        snapshot["auth"] = auth
    return json.dumps(snapshot).encode()


class OffsetsGate:
    """Holds a snapshot's consumer offsets until the replica's commit log reaches the phys offset the snapshot
    came with (see the module doc). Only the newest waiting snapshot is kept: offsets move forward only, and a
    newer snapshot of the master holds every offset an older one did."""

    def __init__(self, offsets, store) -> None:
        self._offsets = offsets
        self._store = store
        self.waiting: tuple[dict, int] | None = None  # (offsets snapshot, master phys offset)

    def offer(self, master_offsets: dict, master_phys_offset: int | None) -> int:
        """Apply ``master_offsets`` now if the replica holds the log up to ``master_phys_offset`` (None: an older
        master that does not say; applied at once), else keep them; returns how many offsets moved."""
        if master_phys_offset is None or master_phys_offset <= self._store.max_phys_offset:
            self.waiting = None  # older than these offsets, and held by them
            return apply_offsets(master_offsets, self._offsets)
        self.waiting = (master_offsets, master_phys_offset)
        return 0

    def replica_grew(self) -> int:
        """After an append: apply the waiting offsets once the replica reached them; returns how many moved."""
        if self.waiting is None or self.waiting[1] > self._store.max_phys_offset:
            return 0
        master_offsets, _ = self.waiting
        self.waiting = None
        return apply_offsets(master_offsets, self._offsets)

    def __repr__(self) -> str:
        return f"<OffsetsGate waiting_phys_offset={self.waiting[1] if self.waiting else None}>"


def apply_metadata(
    body: bytes,
    topics,
    groups,
    offsets,
    services: ServiceStateFollower | None = None,
    offsets_gate: OffsetsGate | None = None,
    auth=None,
) -> MetadataChanges:
    """Make the slave's tables follow the master's snapshot ``body``; ValueError when it does not parse (then
    nothing changed). With ``offsets_gate`` the offsets go through it (a replica), else they apply at once.
    ``auth``: the slave's AuthTable, which takes the master's users and ACLs whole (written first: a snapshot
    whose users do not parse changes nothing)."""
    try:
        snapshot = json.loads(body)
        master_topics = [topic_config_from_json(obj) for obj in snapshot["topics"]]
        master_groups = [group_config_from_json(obj) for obj in snapshot["groups"]]
        master_offsets = snapshot["offsets"]
        version = snapshot.get("version")
        phys_offset = snapshot.get("physOffset")
        if not (version is None or isinstance(version, str)) or not (phys_offset is None or type(phys_offset) is int):
            raise ValueError(f"version {version!r} / physOffset {phys_offset!r}")
        service_state = parse_service_state(snapshot)
        # Checked now: the gate may apply them later, and a snapshot that does not parse changes nothing.
        master_offsets = {key: {int(q): int(o) for q, o in queues.items()} for key, queues in master_offsets.items()}
    except (ValueError, KeyError, TypeError, AttributeError, PocketMQError) as exc:
        raise ValueError(f"metadata snapshot does not parse: {exc}") from None
    if auth is not None and "auth" in snapshot:
        try:
            auth.replace(snapshot["auth"])
        except PocketMQError as exc:
            raise ValueError(f"metadata snapshot's users and ACLs do not parse: {exc}") from None
    topics_changed = _upsert(topics, master_topics, lambda c: c.name)
    topic_names = {c.name for c in master_topics}
    topics_deleted = sum(topics.delete(name) for name in topics.names() if name not in topic_names)
    groups_changed = _upsert(groups, master_groups, lambda g: g.group)
    group_names = {g.group for g in master_groups}
    groups_deleted = sum(groups.delete(g.group) for g in groups.all() if g.group not in group_names)
    offsets_moved = (
        offsets_gate.offer(master_offsets, phys_offset)
        if offsets_gate is not None
        else apply_offsets(master_offsets, offsets)
    )
    service_changes = services.apply(service_state) if services is not None else ServiceStateChanges()
    return MetadataChanges(
        topics_changed, topics_deleted, groups_changed, groups_deleted, offsets_moved, service_changes, version
    )


def apply_offsets(snapshot: dict, offsets) -> int:
    """Move ``offsets`` forward to an ``offsets.snapshot()`` of another broker; returns how many moved.
    ValueError / TypeError / AttributeError when the snapshot is malformed."""
    moved = 0
    for key, queues in snapshot.items():
        topic, _, group = key.partition(_KEY_SEPARATOR)
        for queue_id, queue_offset in queues.items():
            moved += offsets.commit(group, topic, int(queue_id), int(queue_offset))
    return moved


def _upsert(table, configs, name_of) -> int:
    """Create or update every config that differs from ``table``'s; returns how many changed."""
    changed = [c for c in configs if table.get(name_of(c)) != c]
    for config in changed:
        table.create_or_update(config)
    return len(changed)
