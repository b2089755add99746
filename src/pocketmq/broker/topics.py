"""The broker's topic table: which topics exist here, with how many queues, which permission and type.

``TopicManager`` holds the table and tells listeners (the name server registration) which topic changed. Every
change is durable before it is made: appended to the table's journal (``broker.topic_journal``, one fsynced line),
and now and then folded into ``<data_dir>/config/topics.json``, written atomically. Each topic's JSON for the
file is encoded once, when it changes, and the file joined from those pieces. What an unknown topic's first send
creates is ``common.topic.auto_create_decision``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from pocketmq.broker.topic_journal import TopicJournal
from pocketmq.common.dead_letter_reference import REFERENCE_TOPIC
from pocketmq.common.errors import BadRequestError, IllegalTopicError, PocketMQError, TopicNotExistError
from pocketmq.common.gray import gray_ratio_problem
from pocketmq.common.topic import (
    DEFAULT_TOPIC,
    PERM_INHERIT,
    PERM_READ_WRITE,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TopicConfig,
    auto_create_decision,
    revive_topic,
    topic_name_problem,
)
from pocketmq.common.trace_record import TRACE_TOPIC
from pocketmq.protocol.route import topic_config_from_obj, topic_config_to_obj
from pocketmq.runtime.files import atomic_write_bytes, load_json

log = logging.getLogger(__name__)

MAX_QUEUE_NUMS = 1024
_SCHEDULE_QUEUE_NUMS = 18  # one queue per delay level


def system_topics(cluster_name: str, broker_name: str, default_queue_nums: int) -> list[TopicConfig]:
    """Topics every broker has from its first start."""
    return [
        TopicConfig(DEFAULT_TOPIC, default_queue_nums, default_queue_nums, PERM_READ_WRITE | PERM_INHERIT),
        TopicConfig(cluster_name, 16, 16, PERM_READ_WRITE),  # RocketMQ's cluster-name topic, for routing checks
        TopicConfig(broker_name, 1, 1, PERM_READ_WRITE),
        TopicConfig(SCHEDULE_TOPIC, _SCHEDULE_QUEUE_NUMS, _SCHEDULE_QUEUE_NUMS, PERM_READ_WRITE),
        TopicConfig(TIMER_TOPIC, 1, 1, PERM_READ_WRITE),
        TopicConfig(TRANS_HALF_TOPIC, 1, 1, PERM_READ_WRITE),
        TopicConfig(TRANS_OP_HALF_TOPIC, 1, 1, PERM_READ_WRITE),
        TopicConfig(revive_topic(cluster_name), 8, 8, PERM_READ_WRITE),
        TopicConfig(REFERENCE_TOPIC, 1, 1, PERM_READ_WRITE),  # POP's dead-letter references
        TopicConfig(TRACE_TOPIC, 1, 1, PERM_READ_WRITE),  # written by the brokers and by clients that trace
    ]


def validate_topic_config(config: TopicConfig) -> None:
    """Raise BadRequestError/IllegalTopicError unless ``config`` can be created as given."""
    problem = topic_name_problem(config.name)
    if problem:
        raise IllegalTopicError(problem)
    for what, nums in (("read", config.read_queue_nums), ("write", config.write_queue_nums)):
        if not 1 <= nums <= MAX_QUEUE_NUMS:
            raise BadRequestError(f"{what} queue nums {nums} outside [1, {MAX_QUEUE_NUMS}]")
    if config.perm & ~0x7:
        raise BadRequestError(f"perm {config.perm} has bits outside read|write|inherit")
    if config.gray_queue_ratio is not None:
        for nums in sorted({config.read_queue_nums, config.write_queue_nums}):
            problem = gray_ratio_problem(nums, config.gray_queue_ratio)
            if problem:
                raise BadRequestError(f"topic {config.name!r}: {problem}")


def topic_change_refusal(
    current: TopicConfig | None,
    requested: TopicConfig,
    *,
    create_only: bool,
    update_only: bool,
    force: bool,
    stored_messages: Callable[[int], int],
    broker_name: str,
) -> PocketMQError | None:
    """Why an explicit create or update of ``requested`` must not happen here, or None to go ahead.

    ``current`` is the topic as this broker has it (None: unknown); ``stored_messages(queue_id)`` counts the
    messages a queue of it still stores. ``create_only`` refuses an existing topic and ``update_only`` an
    unknown one. Fewer read queues hide the messages of the queues dropped (consumers never read them again),
    so a shrink that would hide any is refused unless ``force``, as Kafka refuses fewer partitions; fewer
    *write* queues hide nothing (RocketMQ's way to shrink: writes first, reads once those queues are drained).
    """
    name = requested.name
    if create_only and update_only:
        return BadRequestError(f"topic {name!r}: a request cannot be both create-only and update-only")
    if current is None:
        if update_only:
            return TopicNotExistError(f"topic {name!r} does not exist on broker {broker_name}: create it first")
        return None
    if create_only:
        return BadRequestError(
            f"topic {name!r} already exists on broker {broker_name} "
            f"({current.read_queue_nums} queues, type {current.message_type.value}): update it "
            f"instead"
        )
    if force:
        return None
    dropped = range(requested.read_queue_nums, current.read_queue_nums)
    hidden = {queue_id: n for queue_id in dropped if (n := stored_messages(queue_id)) > 0}
    if not hidden:
        return None
    return BadRequestError(
        f"topic {name!r} on broker {broker_name}: {current.read_queue_nums} -> "
        f"{requested.read_queue_nums} read queues would hide {sum(hidden.values())} messages "
        f"stored in queues {', '.join(map(str, hidden))}; consume them first or force it"
    )


def topic_config_to_json(config: TopicConfig) -> dict:
    """RocketMQ's TopicConfig JSON shape (GET_ALL_TOPIC_CONFIG, topics.json, the name server registration)."""
    return topic_config_to_obj(config)


def topic_config_from_json(obj: dict) -> TopicConfig:
    return topic_config_from_obj(str(obj.get("topicName") or ""), obj)


class TopicManager:
    """The topic table of one broker, persisted after every change.

    Thread-safe (the gRPC front end may call from its own threads); changes are rare, reads are dict lookups.
    """

    def __init__(
        self, path: Path, *, auto_create_enabled: bool, default_queue_nums: int, builtin: Iterable[TopicConfig] = ()
    ):
        self._path = Path(path)
        self._auto_create_enabled = auto_create_enabled
        self._default_queue_nums = default_queue_nums
        self._topics: dict[str, TopicConfig] = {t.name: t for t in builtin}
        self._lock = threading.RLock()
        self._listeners: list[Callable[[str], None]] = []
        self._encoded: dict[str, tuple[TopicConfig, bytes]] = {}  # name -> (config, its '"name":{...}' in the file)
        self._journal = TopicJournal(self._path)
        self.data_version = 0  # bumped on every change; the name server compares it

    def load(self) -> None:
        """The table's file, then the changes journaled after it."""
        data = load_json(self._path, {})
        for obj in data.get("topicConfigTable", {}).values():
            config = topic_config_from_json(obj)
            self._topics[config.name] = config
        self.data_version = int(data.get("dataVersion", 0))
        replayed = 0
        for version, name, obj in self._journal.replay():
            if version <= self.data_version:
                continue  # folded into the file already (a crash came before the journal was removed)
            if obj is None:
                self._topics.pop(name, None)
            else:
                self._topics[name] = topic_config_from_json(obj)
            self.data_version = version
            replayed += 1
        log.info("event=topics_loaded count=%d journaled=%d path=%s", len(self._topics), replayed, self._path)

    def set_auto_create(self, enabled: bool, default_queue_nums: int) -> None:
        """Change the auto-create rule of a running broker (UPDATE_BROKER_CONFIG)."""
        self._auto_create_enabled = enabled
        self._default_queue_nums = default_queue_nums

    def add_listener(self, callback: Callable[[str], None]) -> None:
        """``callback(topic)`` runs after every change of ``topic`` (create, update, delete)."""
        self._listeners.append(callback)

    def get(self, topic: str) -> TopicConfig | None:
        return self._topics.get(topic)

    def all(self) -> list[TopicConfig]:
        return sorted(self._topics.values(), key=lambda t: t.name)

    def names(self) -> list[str]:
        return sorted(self._topics)

    def require(self, topic: str) -> TopicConfig:
        config = self._topics.get(topic)
        if config is None:
            raise TopicNotExistError(f"topic {topic!r} does not exist on this broker")
        return config

    def get_or_create(self, topic: str) -> TopicConfig:
        """The topic's config, created by the auto-create rule if unknown; TopicNotExistError otherwise."""
        config = self._topics.get(topic)
        if config is not None:
            return config
        problem = topic_name_problem(topic)
        if problem:
            raise IllegalTopicError(problem)
        with self._lock:
            config = self._topics.get(topic)
            if config is not None:
                return config
            config = auto_create_decision(
                topic, auto_create_enabled=self._auto_create_enabled, default_queue_nums=self._default_queue_nums
            )
            if config is None:
                raise TopicNotExistError(f"topic {topic!r} does not exist and auto-creation is off")
            self._put(config, event="topic_auto_created")
            return config

    def create_or_update(self, config: TopicConfig) -> TopicConfig:
        return self.change(config.name, lambda _: config)

    def change(self, topic: str, decide: Callable[[TopicConfig | None], TopicConfig]) -> TopicConfig:
        """Set ``topic`` to ``decide(current)`` (current: None when unknown), computed and applied under the
        table's lock so no other change comes between; ``decide`` raises to refuse."""
        with self._lock:
            current = self._topics.get(topic)
            config = decide(current)
            validate_topic_config(config)
            if current == config:
                return config
            self._put(config, event="topic_updated" if current is not None else "topic_created")
        return config

    def delete(self, topic: str) -> bool:
        with self._lock:
            if topic not in self._topics:
                return False
            table = dict(self._topics)
            del table[topic]
            self._commit(table, "topic_deleted", topic)
        return True

    def _put(self, config: TopicConfig, *, event: str) -> None:
        self._commit({**self._topics, config.name: config}, event, config.name)

    def _commit(self, table: dict[str, TopicConfig], event: str, topic: str) -> None:
        """Persist the change first (a journal line, or the whole file when the journal is due to be folded),
        then make ``table`` the table: a change whose write fails (OSError) is not made, so no topic exists in
        memory that a restart would not find."""
        version = self.data_version + 1
        if self._journal.due(len(table)):
            self._write(table, version)
            self._journal.clear()
        else:
            config = table.get(topic)
            self._journal.append(version, topic, None if config is None else topic_config_to_json(config))
        self._topics, self.data_version = table, version
        log.info("event=%s topic=%s version=%d", event, topic, version)
        for callback in self._listeners:
            callback(topic)

    def _write(self, table: dict[str, TopicConfig], version: int) -> None:
        entries = []
        for name, config in table.items():
            encoded = self._encoded.get(name)
            if encoded is None or encoded[0] is not config:
                entry = json.dumps(name) + ":" + json.dumps(topic_config_to_json(config), sort_keys=True)
                encoded = self._encoded[name] = (config, entry.encode())
            entries.append(encoded[1])
        for name in [name for name in self._encoded if name not in table]:  # deleted
            del self._encoded[name]
        atomic_write_bytes(self._path, b'{"dataVersion":%d,"topicConfigTable":{%s}}' % (version, b",".join(entries)))

    def __repr__(self) -> str:
        return f"<TopicManager topics={len(self._topics)} version={self.data_version}>"
