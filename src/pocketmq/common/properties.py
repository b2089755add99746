"""Message property names (RocketMQ's, so RocketMQ users and clients feel at home) and their wire encoding.

Properties travel as ``name \\x01 value \\x02`` pairs, in send requests and inside stored records.
"""

from __future__ import annotations

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

TAGS = "TAGS"
KEYS = "KEYS"  # space-separated
UNIQ_KEY = "UNIQ_KEY"  # the producer's message id (RocketMQ PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
WAIT_STORE_MSG_OK = "WAIT"
DELAY_TIME_LEVEL = "DELAY"
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QUEUE_ID = "REAL_QID"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIME = "RECONSUME_TIME"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
TRANSACTION_PREPARED = "TRAN_MSG"
PRODUCER_GROUP = "PGROUP"
SHARDING_KEY = "__SHARDINGKEY"  # the message group of FIFO messages
LITE_TOPIC = "__LITE_TOPIC"  # the lite topic of a message to a LITE parent topic (docs/lite.md)
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
POP_CK = "POP_CK"
FIRST_POP_TIME = "1ST_POP_TIME"
MSG_REGION = "MSG_REGION"
TRACE_SWITCH = "TRACE_ON"
CLUSTER = "CLUSTER"
DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
PRIORITY = "_SYS_MSG_PRIORITY_"  # a priority message's level, >= 0, higher first (RocketMQ 5's RIP-80)
IDEMPOTENT = "PMQ_IDEMPOTENT"  # PocketMQ's: "true" asks the broker to store a UNIQ_KEY once (broker/messages.py)

# Names set by the broker or the protocol; a user property may not use them (v2 ILLEGAL_MESSAGE_PROPERTY_KEY).
SYSTEM_PROPERTY_NAMES = frozenset(
    {
        TAGS,
        KEYS,
        UNIQ_KEY,
        WAIT_STORE_MSG_OK,
        DELAY_TIME_LEVEL,
        RETRY_TOPIC,
        REAL_TOPIC,
        REAL_QUEUE_ID,
        ORIGIN_MESSAGE_ID,
        RECONSUME_TIME,
        MAX_RECONSUME_TIMES,
        TRANSACTION_PREPARED,
        PRODUCER_GROUP,
        SHARDING_KEY,
        LITE_TOPIC,
        MIN_OFFSET,
        MAX_OFFSET,
        TIMER_DELIVER_MS,
        TIMER_DELAY_SEC,
        TIMER_DELAY_MS,
        POP_CK,
        FIRST_POP_TIME,
        MSG_REGION,
        TRACE_SWITCH,
        CLUSTER,
        PRIORITY,
        "TRANSACTION_ID",
        "BORN_HOST",
        "INSTANCE_ID",
        "CORRECTION_FLAG",
        "MSG_TYPE",
        "BORNHOST",
    }
)


def encode_properties(properties: dict[str, str]) -> str:
    """Encode a property map in RocketMQ's string form (the order of the dict is kept)."""
    # a list joins faster than a generator (no resumption per item): this runs for every message stored and sent
    return "".join([f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in properties.items()])


def decode_properties(text: str) -> dict[str, str]:
    """Decode RocketMQ's property string; entries that are not exactly ``name\\x01value`` are skipped,
    as RocketMQ's decoder skips them."""
    result: dict[str, str] = {}
    if not text:
        return result
    for item in text.split(PROPERTY_SEPARATOR):
        parts = item.split(NAME_VALUE_SEPARATOR)
        if len(parts) == 2:
            result[parts[0]] = parts[1]
    return result
