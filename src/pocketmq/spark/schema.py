"""The fixed schema of a PocketMQ source, and pulled records turned into Arrow record batches.

``properties`` is always in the schema (so the schema does not change with an option) but is null unless
``includeProperties=true``: building a map per row is the most expensive column. It holds the user
properties only; tags, keys and the message id have their own columns.

Batches are built column by column from ``RecordColumns`` (the pull body decoded without message objects):
tags, keys and UNIQ_KEY are cut out of the encoded property strings by Arrow kernels, so the only
per-row Python work is the record decoder's loop.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pocketmq.common import properties as props
from pocketmq.common.message import SYSFLAG_COMPRESSED
from pocketmq.common.record import RecordColumns

# An Arrow scalar, not the int 1000: a Python operand makes every kernel call search sys.path for numpy.
_MICROS_PER_MS = pa.scalar(1000, pa.int64())

SOURCE_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("broker", StringType(), False),
        StructField("queue_id", IntegerType(), False),
        StructField("queue_offset", LongType(), False),
        StructField("message_id", StringType(), False),
        StructField("keys", StringType(), True),  # space-separated, as RocketMQ's KEYS property
        StructField("tags", StringType(), True),
        StructField("body", BinaryType(), False),
        StructField("born_timestamp", TimestampType(), False),
        StructField("store_timestamp", TimestampType(), False),
        StructField("reconsume_times", IntegerType(), False),
        StructField("properties", MapType(StringType(), StringType(), False), True),
    ]
)


@lru_cache(maxsize=1)
def source_arrow_schema() -> pa.Schema:
    """Exactly what Spark checks a ``read()`` batch against (``to_arrow_schema(schema, timezone="UTC")``)."""
    return to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")


def records_to_batch(topic: str, broker: str, records: RecordColumns, *, include_properties: bool) -> pa.RecordBatch:
    """One Arrow record batch of ``records``, all from one queue of ``topic`` on ``broker``; it matches
    ``source_arrow_schema()`` exactly, as Spark requires of a batch ``read()`` yields."""
    schema = source_arrow_schema()
    count = len(records)
    encoded_properties = pa.array(records.properties, pa.binary()).cast(pa.string())  # checks UTF-8
    uniq_keys, keys, tags = property_columns(encoded_properties, (props.UNIQ_KEY, props.KEYS, props.TAGS))
    message_ids = uniq_keys if uniq_keys.null_count == 0 else pc.coalesce(uniq_keys, _offset_msg_ids(records))
    if include_properties:
        properties = pa.array(
            [list(user_properties(raw).items()) for raw in records.properties], type=schema.field("properties").type
        )
    else:
        properties = pa.nulls(count, type=schema.field("properties").type)
    columns = [
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(broker, pa.string()), count),
        pa.array(records.queue_ids, pa.int32()),
        pa.array(records.queue_offsets, pa.int64()),
        message_ids,
        keys,
        tags,
        _binary_array(_decompressed_bodies(records)),
        _timestamps(records.born_timestamps_ms, schema.field("born_timestamp").type),
        _timestamps(records.store_timestamps_ms, schema.field("store_timestamp").type),
        pa.array(records.reconsume_times, pa.int32()),
        properties,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def property_columns(encoded: pa.StringArray, names: Sequence[str]) -> list[pa.StringArray]:
    """Per name, the property's value in each encoded property string (null where absent; the last one
    when a string repeats it, as ``decode_properties``). Vectorised: the strings are split into
    ``name\\x01value`` items once, and each name is found by prefix among the items."""
    count = len(encoded)
    items = pc.split_pattern(encoded, props.PROPERTY_SEPARATOR)
    flat_items = items.flatten()
    rows_of_items = pc.list_parent_indices(items)
    columns = []
    for name in names:
        prefix = name + props.NAME_VALUE_SEPARATOR
        matching = pc.starts_with(flat_items, prefix)
        values = pc.utf8_slice_codeunits(flat_items.filter(matching), len(prefix))
        rows = rows_of_items.filter(matching)
        if len(rows) == 0:
            columns.append(pa.nulls(count, pa.string()))
        elif len(rows) == count and pc.count_distinct(rows).as_py() == count:
            columns.append(values)  # once in every row (rows are in order): the values are the column
        else:
            by_row = dict(zip(rows.to_pylist(), values.to_pylist()))
            columns.append(pa.array([by_row.get(row) for row in range(count)], pa.string()))
    return columns


def user_properties(encoded: bytes) -> dict[str, str]:
    return {k: v for k, v in props.decode_properties(encoded.decode()).items() if k not in props.SYSTEM_PROPERTY_NAMES}


def _binary_array(values: list[bytes]) -> pa.BinaryArray:
    """``pa.array(values, pa.binary())`` in two copies made in C (join, then one buffer), about twice as
    fast for kilobyte bodies."""
    offsets = pa.array(itertools.accumulate(map(len, values), initial=0), pa.int32())
    return pa.Array.from_buffers(pa.binary(), len(values), [None, offsets.buffers()[1], pa.py_buffer(b"".join(values))])


def _decompressed_bodies(records: RecordColumns) -> list[bytes]:
    """Bodies as the producer wrote them (4.x clients zlib-compress bodies of 4 KiB and more)."""
    bodies = records.bodies
    compressed = [i for i, flag in enumerate(records.sys_flags) if flag & SYSFLAG_COMPRESSED]
    if compressed:
        bodies = list(bodies)
        for i in compressed:
            bodies[i] = zlib.decompress(bodies[i])
    return bodies


def _timestamps(epoch_ms: Sequence[int], arrow_type: pa.DataType) -> pa.Array:
    return pc.multiply(pa.array(epoch_ms, pa.int64()), _MICROS_PER_MS).cast(arrow_type)


def _offset_msg_ids(records: RecordColumns) -> pa.StringArray:
    """The broker-side message ids (store host and phys offset), for records without a UNIQ_KEY."""
    return pa.array(
        [
            (host + phys.to_bytes(8, "big", signed=True)).hex().upper()
            for host, phys in zip(records.store_hosts, records.phys_offsets)
        ],
        pa.string(),
    )
