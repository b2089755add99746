"""Subscription (consumer) groups: their retry policy and switches, persisted atomically.

A group is created on first use when ``auto_create`` is on (RocketMQ's autoCreateSubscriptionGroup), else
it must be created by an admin (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) before it can consume.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketmq.broker.gray_split import GrayRule
from pocketmq.common.errors import BadRequestError, SubscriptionGroupNotExistError
from pocketmq.common.topic import TOOLS_CONSUMER_GROUP, group_name_problem
from pocketmq.protocol.headers import INT32_MAX, INT64_MAX, lenient_int
from pocketmq.runtime.files import atomic_write_json, load_json

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    group: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False  # FIFO: one message group in flight at a time
    retry_queue_nums: int = 1
    retry_max_times: int = 16  # attempts before the dead-letter queue
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    attributes: dict[str, str] = field(default_factory=dict)  # RocketMQ 5's; gray release reads two (gray_split.py)


# Python field name <-> RocketMQ's JSON field name.
_JSON_NAMES = {
    "group": "groupName",
    "consume_enable": "consumeEnable",
    "consume_from_min_enable": "consumeFromMinEnable",
    "consume_broadcast_enable": "consumeBroadcastEnable",
    "consume_message_orderly": "consumeMessageOrderly",
    "retry_queue_nums": "retryQueueNums",
    "retry_max_times": "retryMaxTimes",
    "broker_id": "brokerId",
    "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
    "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable",
    "attributes": "attributes",
}


def group_config_to_json(config: SubscriptionGroupConfig) -> dict:
    return {json_name: getattr(config, name) for name, json_name in _JSON_NAMES.items()}


def group_config_from_json(obj: dict) -> SubscriptionGroupConfig:
    """Parse RocketMQ's SubscriptionGroupConfig JSON; raises BadRequestError on a missing or bad field."""
    if not isinstance(obj, dict):
        raise BadRequestError("subscription group config must be a JSON object")
    values: dict[str, Any] = {}  # field name -> value of that field's type, checked as parsed
    for f in dataclasses.fields(SubscriptionGroupConfig):
        json_name = _JSON_NAMES[f.name]
        if json_name not in obj:
            continue
        raw = obj[json_name]
        try:
            if f.type == "bool":
                values[f.name] = raw if isinstance(raw, bool) else str(raw).lower() == "true"
            elif f.type == "int":
                if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
                    raise TypeError(raw)
                values[f.name] = lenient_int(str(raw), json_name)
            elif f.name == "attributes":
                values[f.name] = {str(k): str(v) for k, v in raw.items()}
            else:
                values[f.name] = str(raw)
        except (AttributeError, TypeError, ValueError, BadRequestError):
            raise BadRequestError(f"subscription group field {json_name}={raw!r} is not valid") from None
    if "group" not in values:
        raise BadRequestError("subscription group config lacks groupName")
    config = SubscriptionGroupConfig(**values)
    validate_group_config(config)
    return config


def validate_group_config(config: SubscriptionGroupConfig) -> None:
    problem = group_name_problem(config.group)
    if problem:
        raise BadRequestError(problem)
    # -1 is the default, 16 (the meaning a client's maxReconsumeTimes -1 has; docs/protocol.md, "Validation").
    if not -1 <= config.retry_max_times <= INT32_MAX:
        raise BadRequestError(f"retryMaxTimes {config.retry_max_times} is outside [-1, {INT32_MAX}]")
    if not 1 <= config.retry_queue_nums <= 64:
        raise BadRequestError("retryQueueNums must be in [1, 64]")
    for name, value in (
        ("brokerId", config.broker_id),
        ("whichBrokerWhenConsumeSlowly", config.which_broker_when_consume_slowly),
    ):
        if not 0 <= value <= INT64_MAX:
            raise BadRequestError(f"{name} {value} is outside [0, {INT64_MAX}]")
    GrayRule.of(config.attributes)  # a bad gray ratio is refused here, not at the next pop


class SubscriptionGroupManager:
    """The group table of one broker, persisted after every change (``<data_dir>/config/groups.json``)."""

    def __init__(self, path: Path, *, auto_create: bool):
        self._path = Path(path)
        self._auto_create = auto_create
        self._groups: dict[str, SubscriptionGroupConfig] = {}
        self._lock = threading.RLock()
        self.data_version = 0

    def load(self) -> None:
        data = load_json(self._path, {})
        for obj in data.get("subscriptionGroupTable", {}).values():
            config = group_config_from_json(obj)
            self._groups[config.group] = config
        self.data_version = int(data.get("dataVersion", 0))
        log.info("event=groups_loaded count=%d path=%s", len(self._groups), self._path)

    def set_auto_create(self, enabled: bool) -> None:
        self._auto_create = enabled

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self._groups.get(group)

    def all(self) -> list[SubscriptionGroupConfig]:
        return sorted(self._groups.values(), key=lambda g: g.group)

    def get_or_create(self, group: str) -> SubscriptionGroupConfig:
        """The group's config, created with defaults when unknown and auto-creation is on."""
        config = self._groups.get(group)
        if config is not None:
            return config
        if group == TOOLS_CONSUMER_GROUP:
            return SubscriptionGroupConfig(group)  # the admin tools' reads: served by defaults, never stored
        problem = group_name_problem(group)
        if problem:
            raise BadRequestError(problem)
        if not self._auto_create:
            raise SubscriptionGroupNotExistError(f"subscription group {group!r} does not exist")
        config = SubscriptionGroupConfig(group)
        try:
            return self.create_or_update(config)
        except OSError as exc:
            # A group made of defaults needs no file to be served, and reads must keep working on a full disk:
            # it is used from memory, written with the table's next change, or made again after a restart.
            with self._lock:
                self._groups.setdefault(group, config)
            log.warning("event=group_auto_created_unsaved group=%s error=%r", group, exc)
            return self._groups[group]

    def create_or_update(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        validate_group_config(config)
        with self._lock:
            if self._groups.get(config.group) == config:
                return config
            self._commit({**self._groups, config.group: config}, "group_updated", config.group)
        return config

    def delete(self, group: str) -> bool:
        with self._lock:
            if group not in self._groups:
                return False
            table = dict(self._groups)
            del table[group]
            self._commit(table, "group_deleted", group)
        return True

    def _commit(self, table: dict[str, SubscriptionGroupConfig], event: str, group: str) -> None:
        """Persist ``table`` first, then make it the table: a change whose write fails (OSError) is not made."""
        version = self.data_version + 1
        atomic_write_json(
            self._path,
            {
                "subscriptionGroupTable": {name: group_config_to_json(c) for name, c in table.items()},
                "dataVersion": version,
            },
        )
        self._groups, self.data_version = table, version
        log.info("event=%s group=%s version=%d", event, group, version)

    def __repr__(self) -> str:
        return f"<SubscriptionGroupManager groups={len(self._groups)}>"
