"""The fixed schema of a PocketMQ source, and stored messages turned into Arrow record batches.

``properties`` is always in the schema (so the schema does not change with an option) but is null unless
``includeProperties=true``: building a map per row is the most expensive column. It holds the user
properties only; tags, keys and the message id have their own columns.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (BinaryType, IntegerType, LongType, MapType, StringType, StructField, StructType,
                               TimestampType)

from pocketmq.common import properties as props
from pocketmq.common.message import MessageExt

SOURCE_SCHEMA = StructType([
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
])


@lru_cache(maxsize=1)
def source_arrow_schema() -> pa.Schema:
    """Exactly what Spark checks a ``read()`` batch against (``to_arrow_schema(schema, timezone="UTC")``)."""
    return to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")


def messages_to_batch(topic: str, broker: str, messages: Sequence[MessageExt], *,
                      include_properties: bool) -> pa.RecordBatch:
    """One Arrow record batch of ``messages``, all from one queue of ``topic`` on ``broker``."""
    schema = source_arrow_schema()
    count = len(messages)
    tags, keys = [], []
    for m in messages:
        p = m.properties
        tags.append(p.get(props.TAGS))
        keys.append(p.get(props.KEYS))
    if include_properties:
        properties = pa.array([list(m.user_properties().items()) for m in messages],
                              type=schema.field("properties").type)
    else:
        properties = pa.nulls(count, type=schema.field("properties").type)
    columns = [
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(broker, pa.string()), count),
        pa.array([m.queue_id for m in messages], pa.int32()),
        pa.array([m.queue_offset for m in messages], pa.int64()),
        pa.array([m.msg_id for m in messages], pa.string()),
        pa.array(keys, pa.string()),
        pa.array(tags, pa.string()),
        pa.array([m.decompressed_body() for m in messages], pa.binary()),
        pa.array([m.born_timestamp_ms * 1000 for m in messages], schema.field("born_timestamp").type),
        pa.array([m.store_timestamp_ms * 1000 for m in messages], schema.field("store_timestamp").type),
        pa.array([m.reconsume_times for m in messages], pa.int32()),
        properties,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
