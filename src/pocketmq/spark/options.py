"""The options of the ``pocketmq`` Spark data source: parsed once, validated all at once, case-insensitive.

Spark hands a data source its ``.option(...)`` values as strings. Everything is checked here, before any
network call, so a bad option fails the query at start with a message naming the option. Checks that need
the cluster (does the topic exist?) are done by the readers and writers, also at start, also naming the
option. Names and meanings follow Spark's Kafka source where they overlap.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import overload

from pocketmq.client.selector import MessageSelector
from pocketmq.common.errors import ConfigError
from pocketmq.common.sql_filter import SqlFilterError
from pocketmq.common.topic import group_name_problem, topic_name_problem
from pocketmq.spark.offsets import OffsetSpec, parse_offset_spec

DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Kafka's default, 15m
DEFAULT_PULL_BATCH_SIZE = 1024
MAX_PULL_BATCH_SIZE = 32 * 1024
DEFAULT_PULL_TIMEOUT_MS = 10_000

# Options the source understands, in their documented spelling (matching is case-insensitive).
SOURCE_OPTIONS = (
    "namesrv",
    "topic",
    "topics",
    "topicPattern",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "failOnDataLoss",
    "includeProperties",
    "tags",
    "sql",
    "commitToGroup",
    "minPartitions",
    "pullBatchSize",
    "pullTimeoutMs",
)
SINK_OPTIONS = ("namesrv", "topic", "sendTimeoutMs", "idempotent")
# Options Spark itself may pass through to a source or sink; never ours to judge.
SPARK_PASS_THROUGH = frozenset({"path", "paths", "checkpointlocation", "queryname", "__partition_columns"})


class OptionError(ConfigError):
    """A bad data source option; ``option`` names it in the documented spelling."""

    def __init__(self, option: str, problem: str):
        super().__init__(f"pocketmq option {option!r}: {problem}")
        self.option = option


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What a reader needs, validated. ``topics`` is empty when ``topic_pattern`` subscribes instead."""

    namesrv: str
    topics: tuple[str, ...]
    topic_pattern: str | None
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    fail_on_data_loss: bool
    include_properties: bool
    selector: MessageSelector  # the broker filters by it: ``tags`` or ``sql``
    commit_to_group: str | None
    min_partitions: int | None
    pull_batch_size: int
    pull_timeout_ms: int

    def subscribes(self, topic: str) -> bool:
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None
        return topic in self.topics


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """What a writer needs: ``topic`` (when set) overrides the ``topic`` column, as in Kafka's sink."""

    namesrv: str
    topic: str | None
    send_timeout_ms: int
    idempotent: bool


def parse_source_options(raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate a reader's options; ``streaming`` selects the defaults (latest vs earliest start)."""
    opts = _Options(raw, SOURCE_OPTIONS)
    topics = _topic_list(opts)
    pattern = opts.get("topicPattern")
    if pattern is not None:
        if topics:
            given = "topic" if opts.get("topic") is not None else "topics"
            raise OptionError("topicPattern", f"give either {given!r} or 'topicPattern', not both")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError("topicPattern", f"not a valid regular expression: {exc}") from None
    elif not topics:
        raise OptionError("topic", "required: a topic, a comma-separated list of topics, or 'topicPattern'")

    ts_text = opts.get("startingTimestamp")
    if ts_text is not None:
        # As in Kafka, a starting timestamp takes precedence over startingOffsets.
        starting = OffsetSpec.at_timestamp(_int("startingTimestamp", ts_text, minimum=0))
    else:
        starting = _offset_spec("startingOffsets", opts.get("startingOffsets", "latest" if streaming else "earliest"))
    if not streaming and starting.kind == "latest":
        raise OptionError("startingOffsets", "'latest' is not allowed for batch queries (it reads nothing)")
    ending_text = opts.get("endingOffsets")
    if streaming and ending_text is not None:
        raise OptionError("endingOffsets", "only for batch queries; a stream has no end")
    ending = _offset_spec("endingOffsets", ending_text or "latest")
    if ending.kind == "earliest":
        raise OptionError("endingOffsets", "'earliest' is not allowed (it reads nothing)")
    if ending.kind == "timestamp":
        raise OptionError("endingOffsets", "must be 'latest' or a JSON object of offsets")
    _check_spec_topics(starting, "startingOffsets", topics, pattern)
    _check_spec_topics(ending, "endingOffsets", topics, pattern)

    max_offsets = _optional_int(opts, "maxOffsetsPerTrigger", minimum=1)
    min_offsets = _optional_int(opts, "minOffsetsPerTrigger", minimum=1)
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise OptionError("minOffsetsPerTrigger", f"{min_offsets} is larger than maxOffsetsPerTrigger {max_offsets}")
    delay_text = opts.get("maxTriggerDelay")
    if delay_text is not None and min_offsets is None:
        raise OptionError("maxTriggerDelay", "only meaningful with minOffsetsPerTrigger")
    group = opts.get("commitToGroup")
    if group is not None and (problem := group_name_problem(group)):
        raise OptionError("commitToGroup", problem)
    if group is not None and not streaming:
        raise OptionError("commitToGroup", "only for streaming queries (a batch query commits nothing)")
    return SourceOptions(
        namesrv=_namesrv(opts),
        topics=topics,
        topic_pattern=pattern,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=(
            parse_duration_ms(delay_text, "maxTriggerDelay") if delay_text is not None else DEFAULT_MAX_TRIGGER_DELAY_MS
        ),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_properties=_bool(opts, "includeProperties", False),
        selector=_selector(opts),
        commit_to_group=group,
        min_partitions=_optional_int(opts, "minPartitions", minimum=1),
        pull_batch_size=_optional_int(opts, "pullBatchSize", minimum=1, maximum=MAX_PULL_BATCH_SIZE)
        or DEFAULT_PULL_BATCH_SIZE,
        pull_timeout_ms=_optional_int(opts, "pullTimeoutMs", minimum=100) or DEFAULT_PULL_TIMEOUT_MS,
    )


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    opts = _Options(raw, SINK_OPTIONS)
    topic = opts.get("topic")
    if topic is not None and (problem := topic_name_problem(topic)):
        raise OptionError("topic", problem)
    return SinkOptions(
        namesrv=_namesrv(opts),
        topic=topic,
        send_timeout_ms=_optional_int(opts, "sendTimeoutMs", minimum=100) or 10_000,
        idempotent=_bool(opts, "idempotent", True),
    )


def parse_duration_ms(text: str, option: str) -> int:
    """``500ms``, ``30s``, ``15m``, ``1h``, ``1d``; a bare number is milliseconds (as Spark's timeStringAsMs)."""
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|sec|m|min|h|d)?\s*", text.lower())
    if not match:
        raise OptionError(option, f"{text!r} is not a duration (e.g. 500ms, 30s, 15m, 1h)")
    unit_ms = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
    return int(match.group(1)) * unit_ms[match.group(2) or "ms"]


class _Options:
    """Case-insensitive lookup that rejects likely typos of known options."""

    def __init__(self, raw: Mapping[str, str], known: tuple[str, ...]):
        self._spelling = {name.lower(): name for name in known}
        self._values: dict[str, str] = {}
        for key, value in raw.items():
            lowered = key.lower()
            if lowered not in self._spelling and lowered not in SPARK_PASS_THROUGH:
                close = difflib.get_close_matches(lowered, self._spelling, n=1, cutoff=0.8)
                hint = f" (did you mean {self._spelling[close[0]]!r}?)" if close else ""
                raise OptionError(key, f"unknown option{hint}; known: {', '.join(known)}")
            self._values[lowered] = value

    @overload
    def get(self, name: str) -> str | None: ...

    @overload
    def get(self, name: str, default: str) -> str: ...

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._values.get(name.lower(), default)


def _namesrv(opts: _Options) -> str:
    text = (opts.get("namesrv") or "").strip()
    if not text:
        raise OptionError("namesrv", "required: the name server address, HOST:PORT (several separated by ';')")
    for address in text.split(";"):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise OptionError("namesrv", f"{address!r} is not HOST:PORT")
    return text


def _selector(opts: _Options) -> MessageSelector:
    """``sql`` (an SQL92 expression, compiled here so that a bad one fails the query at start with the position of
    its fault) or ``tags``: a pull carries one expression, so not both."""
    sql = opts.get("sql")
    if sql is None:
        return MessageSelector.by_tag(opts.get("tags") or "*")
    if opts.get("tags") is not None:
        raise OptionError("sql", "give either 'tags' or 'sql', not both (an SQL92 expression can test TAGS)")
    try:
        return MessageSelector.by_sql(sql)
    except SqlFilterError as exc:
        raise OptionError("sql", str(exc)) from None


def _topic_list(opts: _Options) -> tuple[str, ...]:
    given = [(name, text) for name in ("topic", "topics") if (text := opts.get(name)) is not None]
    if len(given) > 1:
        raise OptionError("topics", "give either 'topic' or 'topics' (they are the same option), not both")
    if not given:
        return ()
    name, text = given[0]
    topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    if not topics:
        raise OptionError(name, "no topic given")
    for topic in topics:
        if problem := topic_name_problem(topic):
            raise OptionError(name, problem)
    return topics


def _check_spec_topics(spec: OffsetSpec, option: str, topics: tuple[str, ...], pattern: str | None) -> None:
    for topic in spec.topics():
        subscribed = re.fullmatch(pattern, topic) is not None if pattern is not None else topic in topics
        if not subscribed:
            raise OptionError(option, f"names topic {topic!r}, which the query does not subscribe to")


def _offset_spec(option: str, text: str) -> OffsetSpec:
    try:
        return parse_offset_spec(text)
    except ValueError as exc:
        raise OptionError(option, str(exc)) from None


def _int(name: str, text: str, *, minimum: int, maximum: int | None = None) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(name, f"{text!r} is not an integer") from None
    if value < minimum:
        raise OptionError(name, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise OptionError(name, f"must be at most {maximum}, got {value}")
    return value


def _optional_int(opts: _Options, name: str, *, minimum: int, maximum: int | None = None) -> int | None:
    text = opts.get(name)
    return None if text is None else _int(name, text, minimum=minimum, maximum=maximum)


def _bool(opts: _Options, name: str, default: bool) -> bool:
    text = opts.get(name)
    if text is None:
        return default
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(name, f"{text!r} is not true or false")
    return lowered == "true"
