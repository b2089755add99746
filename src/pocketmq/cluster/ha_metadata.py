"""Metadata a slave copies from its master (HA_SYNC_METADATA): topics, subscription groups, consumer offsets,
and the service state of ``cluster.ha_services`` (stage offsets, FIFO POP state, staged-POP registrations,
timer progress).

Snapshot body (JSON)::

    {"topics": [TopicConfig JSON, ...], "groups": [SubscriptionGroupConfig JSON, ...],
     "offsets": {"topic@group": {"queueId": queue offset}},
     "stageOffsets": ..., "popFifo": ..., "popStages": ..., "timer": ...}   # ha_services; absent before

Applying it makes the slave's topic and group tables equal to the master's (creating, updating, deleting;
deleting a topic here drops only its config: its records come and go with the replicated commit log).
Offsets only move forward, so a consumer that committed on the slave while its master was down keeps its
progress when the master, with older offsets, is followed again. The service state is applied by an
``ha_services.ServiceStateFollower`` (see there). Everything is parsed before anything changes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pocketmq.broker.groups import group_config_from_json, group_config_to_json
from pocketmq.broker.topics import topic_config_from_json, topic_config_to_json
from pocketmq.cluster.ha_services import (
    ServiceStateChanges,
    ServiceStateFollower,
    ServiceTables,
    parse_service_state,
    service_state_snapshot,
)
from pocketmq.errors import PocketMQError

_KEY_SEPARATOR = "@"


@dataclass(frozen=True, slots=True)
class MetadataChanges:
    topics_changed: int
    topics_deleted: int
    groups_changed: int
    groups_deleted: int
    offsets_moved: int
    services: ServiceStateChanges = ServiceStateChanges()

    @property
    def any(self) -> bool:
        return any((self.topics_changed, self.topics_deleted, self.groups_changed, self.groups_deleted,
                    self.offsets_moved, self.services.any))


def metadata_snapshot(topics, groups, offsets, services: ServiceTables = ServiceTables()) -> bytes:
    return json.dumps({"topics": [topic_config_to_json(c) for c in topics.all()],
                       "groups": [group_config_to_json(g) for g in groups.all()],
                       "offsets": offsets.snapshot(), **service_state_snapshot(services)}).encode()


def apply_metadata(body: bytes, topics, groups, offsets,
                   services: ServiceStateFollower | None = None) -> MetadataChanges:
    """Make the slave's tables follow the master's snapshot ``body``; ValueError when it does not parse (then
    nothing changed)."""
    try:
        snapshot = json.loads(body)
        master_topics = [topic_config_from_json(obj) for obj in snapshot["topics"]]
        master_groups = [group_config_from_json(obj) for obj in snapshot["groups"]]
        master_offsets = snapshot["offsets"]
        service_state = parse_service_state(snapshot)
    except (ValueError, KeyError, TypeError, AttributeError, PocketMQError) as exc:
        raise ValueError(f"metadata snapshot does not parse: {exc}") from None
    topics_changed = _upsert(topics, master_topics, lambda c: c.name)
    topic_names = {c.name for c in master_topics}
    topics_deleted = sum(topics.delete(name) for name in topics.names() if name not in topic_names)
    groups_changed = _upsert(groups, master_groups, lambda g: g.group)
    group_names = {g.group for g in master_groups}
    groups_deleted = sum(groups.delete(g.group) for g in groups.all() if g.group not in group_names)
    offsets_moved = apply_offsets(master_offsets, offsets)
    service_changes = services.apply(service_state) if services is not None else ServiceStateChanges()
    return MetadataChanges(topics_changed, topics_deleted, groups_changed, groups_deleted, offsets_moved,
                           service_changes)


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
