"""Message records in RocketMQ 4.x's layout: the commit log's record format and a PULL_MESSAGE body.

The store writes and reads records, a pull reply carries them unchanged, clients and the Spark source decode
them: one definition for all, below both the store and the protocol (docs/architecture.md, "Decisions").

Record layout (big-endian; IPv4 hosts; 1-byte topic length, as 4.x clients parse strictly)::

    int32 total_size     int32 magic          int32 body_crc (zlib CRC32 of the body as stored)
    int32 queue_id       int32 flag           int64 queue_offset     int64 phys_offset
    int32 sys_flag       int64 born_ts_ms     4B born ip + int32 born port
    int64 store_ts_ms    4B store ip + int32 store port             int32 reconsume_times
    int64 prepared_transaction_offset
    int32 body_length + body      int8 topic_length + topic      int16 properties_length + properties

Because the store keeps records in exactly this layout, a pull reply is the stored records back to back.
"""

from __future__ import annotations

import socket
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from pocketmq.common.message import MessageExt
from pocketmq.common.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, decode_properties, encode_properties

MESSAGE_MAGIC_CODE = -626843481  # 0xAABBCCDD ^ (1880681586 + 8), RocketMQ's V1 record magic
BLANK_MAGIC_CODE = -875286124  # RocketMQ's end-of-file filler magic

# Everything up to and including the prepared transaction offset.
_FIXED = struct.Struct(">iiiiiqqiq4siq4siiq")
FIXED_PART_SIZE = _FIXED.size  # 84
QUEUE_OFFSET_POS = 20
PHYS_OFFSET_POS = 28
STORE_TIMESTAMP_POS = 56
RECORD_HEAD = struct.Struct(_FIXED.format + "i")  # the fixed part and the body length: one pack per record
_RECORD_OVERHEAD = RECORD_HEAD.size + 1 + 2  # + the topic and properties lengths
_TOPIC_LENGTH = [bytes((n,)) for n in range(256)]
MAX_PROPERTIES_BYTES = 32767
MAX_TOPIC_BYTES = 127


_NAME_VALUE_SEPARATOR_BYTES = NAME_VALUE_SEPARATOR.encode()
_PROPERTY_SEPARATOR_BYTES = PROPERTY_SEPARATOR.encode()
_PROPERTY_SEPARATOR_BYTE = _PROPERTY_SEPARATOR_BYTES[0]


class RecordFormatError(ValueError):
    """Bytes that are not a well-formed message record."""


_QUEUE_OFFSET = struct.Struct(">q")


def record_queue_offset(record: bytes) -> int:
    """The queue offset of a stored record, read in place (no decode)."""
    return _QUEUE_OFFSET.unpack_from(record, QUEUE_OFFSET_POS)[0]


def property_keys(names: Iterable[str]) -> tuple[tuple[str, bytes], ...]:
    """``names`` with the bytes each starts its entry with in a record: ``record_property_values``'s keys."""
    return tuple((name, f"{name}{NAME_VALUE_SEPARATOR}".encode()) for name in sorted(names))


def record_property_values(record: bytes, keys: tuple[tuple[str, bytes], ...]) -> dict[str, str]:
    """The values of the properties ``keys`` names (``property_keys``) in a stored record, found in place
    without decoding the record or its other properties: a broker-side filter reads them for every record it
    tests. The separators are ASCII control bytes, which never occur inside a UTF-8 multi-byte character, so
    a byte search finds exactly the entries ``decode_properties`` would. The record is one the store verified."""
    start = FIXED_PART_SIZE + 4 + int.from_bytes(record[FIXED_PART_SIZE : FIXED_PART_SIZE + 4], "big")
    start += 3 + record[start]  # the topic, its length byte and the properties' 2-byte length
    end = start + int.from_bytes(record[start - 2 : start], "big")
    values = {}
    for name, key in keys:
        at = record.find(key, start, end)
        while at > start and record[at - 1] != _PROPERTY_SEPARATOR_BYTE:  # inside another entry
            at = record.find(key, at + 1, end)
        if at < 0:
            continue
        value_start = at + len(key)
        value_end = record.find(_PROPERTY_SEPARATOR_BYTES, value_start, end)
        value_end = end if value_end < 0 else value_end
        if record.find(_NAME_VALUE_SEPARATOR_BYTES, value_start, value_end) < 0:  # else malformed: skipped
            values[name] = record[value_start:value_end].decode()
    return values


def record_size(body_len: int, topic_len: int, properties_len: int) -> int:
    return _RECORD_OVERHEAD + body_len + topic_len + properties_len


def encode_record(msg: MessageExt, properties_bytes: bytes | None = None) -> bytes:
    """Encode ``msg`` as a stored record; ``body_crc`` and ``store_size`` are computed here.

    ``properties_bytes`` may be passed pre-encoded (the store encodes them outside its write lock).
    """
    topic = msg.topic.encode()
    if len(topic) > MAX_TOPIC_BYTES:
        raise RecordFormatError(f"topic is {len(topic)} bytes, more than {MAX_TOPIC_BYTES}")
    if properties_bytes is None:
        properties_bytes = encode_properties(msg.properties).encode()
    if len(properties_bytes) > MAX_PROPERTIES_BYTES:
        raise RecordFormatError(f"properties are {len(properties_bytes)} bytes, more than {MAX_PROPERTIES_BYTES}")
    body = msg.body
    size = _RECORD_OVERHEAD + len(body) + len(topic) + len(properties_bytes)
    body_crc = zlib.crc32(body) & 0x7FFFFFFF
    msg.body_crc = body_crc
    msg.store_size = size
    born_host, store_host = msg.born_host, msg.store_host
    head = RECORD_HEAD.pack(
        size,
        MESSAGE_MAGIC_CODE,
        body_crc,
        msg.queue_id,
        msg.flag,
        msg.queue_offset,
        msg.phys_offset,
        msg.sys_flag,
        msg.born_timestamp_ms,
        _ip4(born_host[0]),
        born_host[1],
        msg.store_timestamp_ms,
        _ip4(store_host[0]),
        store_host[1],
        msg.reconsume_times,
        msg.prepared_transaction_offset,
        len(body),
    )
    return b"".join(
        (head, body, _TOPIC_LENGTH[len(topic)], topic, len(properties_bytes).to_bytes(2, "big"), properties_bytes)
    )


def decode_record(buf: bytes | memoryview, pos: int = 0) -> tuple[MessageExt, int]:
    """Decode the record at ``pos``; returns it and the position after it."""
    try:
        (
            size,
            magic,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            phys_offset,
            sys_flag,
            born_ts,
            born_ip,
            born_port,
            store_ts,
            store_ip,
            store_port,
            reconsume_times,
            prepared_tx,
            body_len,
        ) = RECORD_HEAD.unpack_from(buf, pos)  # a record of a valid size always holds its body length
    except struct.error as exc:
        raise RecordFormatError(f"truncated record header at {pos}: {exc}") from None
    if magic != MESSAGE_MAGIC_CODE:
        raise RecordFormatError(f"bad magic {magic:#x} at {pos}")
    end = pos + size
    if size < record_size(0, 0, 0) or end > len(buf):
        raise RecordFormatError(f"record size {size} at {pos} does not fit in {len(buf)} bytes")
    p = pos + RECORD_HEAD.size
    if body_len < 0 or p + body_len > end:
        raise RecordFormatError(f"body length {body_len} at {pos} out of range")
    body = bytes(buf[p : p + body_len])
    p += body_len
    topic_len = buf[p]
    p += 1
    try:
        topic = bytes(buf[p : p + topic_len]).decode()
        p += topic_len
        props_len = int.from_bytes(buf[p : p + 2], "big", signed=True)
        p += 2
        if props_len < 0 or p + props_len != end:
            raise RecordFormatError(f"record at {pos}: fields do not add up to its size {size}")
        properties = decode_properties(bytes(buf[p : p + props_len]).decode())
    except UnicodeDecodeError as exc:  # a damaged record must fail like any other bad record, not crash a reader
        raise RecordFormatError(f"record at {pos}: topic or properties are not UTF-8: {exc}") from None
    msg = MessageExt(
        topic=topic,
        body=body,
        properties=properties,
        flag=flag,
        queue_id=queue_id,
        queue_offset=queue_offset,
        phys_offset=phys_offset,
        sys_flag=sys_flag,
        born_timestamp_ms=born_ts,
        born_host=(_ip4_text(born_ip), born_port),
        store_timestamp_ms=store_ts,
        store_host=(_ip4_text(store_ip), store_port),
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_tx,
        body_crc=body_crc,
        store_size=size,
    )
    return msg, end


def decode_records(buf: bytes | memoryview) -> list[MessageExt]:
    """Decode records back to back (a pull reply body)."""
    messages, error = decode_records_prefix(buf)
    if error is not None:
        raise error
    return messages


def decode_records_prefix(buf: bytes | memoryview) -> tuple[list[MessageExt], RecordFormatError | None]:
    """The records before the first one that does not decode, and why it does not (None when all do): a
    client keeps the good records of a reply that holds a damaged one (nothing after it can be trusted: its
    size field may be what is damaged)."""
    messages: list[MessageExt] = []
    pos = 0
    while pos < len(buf):
        try:
            msg, pos = decode_record(buf, pos)
        except RecordFormatError as exc:
            return messages, exc
        messages.append(msg)
    return messages, None


_IP4_CACHE: dict[str, bytes] = {}  # a broker sees few hosts (its own, its clients'): two lookups per record saved
_IP4_CACHE_MAX = 4096
_IP4_TEXT_CACHE: dict[bytes, str] = {}  # the same few hosts, read back: two conversions per decoded record saved


def _ip4_text(packed: bytes) -> str:
    text = _IP4_TEXT_CACHE.get(packed)
    if text is None:
        text = socket.inet_ntoa(packed)
        if len(_IP4_TEXT_CACHE) < _IP4_CACHE_MAX:
            _IP4_TEXT_CACHE[packed] = text
    return text


def _ip4(host: str) -> bytes:
    packed = _IP4_CACHE.get(host)
    if packed is None:
        try:
            packed = socket.inet_aton(host)
        except OSError:
            packed = b"\x7f\x00\x00\x01"
        if len(_IP4_CACHE) < _IP4_CACHE_MAX:
            _IP4_CACHE[host] = packed
    return packed


# What ``decode_record_columns`` keeps of a record's fixed part, and the body length after it:
# size, magic, queue_id, queue_offset, phys_offset, sys_flag, born_ts, store_ts, store host (IPv4 + port),
# reconsume_times, body_length (crc, flag, born host and prepared offset are skipped).
_COLUMNS_HEAD = struct.Struct(">ii4xi4xqqiq8xq8si8xi")
_COLUMNS_HEAD_FIELDS = 11


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """Records decoded field by field: index ``i`` of every column is record ``i``.

    For bulk readers (the Spark source) that build columns, not ``MessageExt`` objects. Bodies are as
    stored (zlib-compressed when ``sys_flags`` has SYSFLAG_COMPRESSED); properties are the encoded
    ``name\\x01value\\x02`` UTF-8 bytes; a store host is 4 bytes of IPv4 and a 4-byte port, which with the
    phys offset makes the offset message id. Topics are checked for layout but not kept: a pull reply holds
    one queue's records.
    """

    queue_ids: tuple[int, ...]
    queue_offsets: tuple[int, ...]
    phys_offsets: tuple[int, ...]
    sys_flags: tuple[int, ...]
    born_timestamps_ms: tuple[int, ...]
    store_timestamps_ms: tuple[int, ...]
    store_hosts: tuple[bytes, ...]
    reconsume_times: tuple[int, ...]
    bodies: list[bytes]
    properties: list[bytes]

    def __len__(self) -> int:
        return len(self.bodies)


def decode_record_columns(buf: bytes) -> RecordColumns:
    """Decode records back to back (a pull reply body) into columns; about four times cheaper per record
    than ``decode_records`` since it makes no message objects and parses no properties. Raises
    RecordFormatError on anything ``decode_record`` would refuse."""
    unpack_head = _COLUMNS_HEAD.unpack_from
    head_size = _COLUMNS_HEAD.size
    heads, bodies, properties = [], [], []
    pos, total = 0, len(buf)
    try:
        while pos < total:
            head = unpack_head(buf, pos)
            size, body_len = head[0], head[-1]
            end = pos + size
            body_start = pos + head_size
            body_end = body_start + body_len
            if head[1] != MESSAGE_MAGIC_CODE:
                raise RecordFormatError(f"bad magic {head[1]:#x} at {pos}")
            if end > total or body_len < 0 or body_end + 3 > end:
                raise RecordFormatError(f"record size {size} at {pos} does not fit its fields or {total} bytes")
            props_start = body_end + 3 + buf[body_end]
            if props_start + ((buf[props_start - 2] << 8) | buf[props_start - 1]) != end:
                raise RecordFormatError(f"record at {pos}: fields do not add up to its size {size}")
            heads.append(head)
            bodies.append(buf[body_start:body_end])
            properties.append(buf[props_start:end])
            pos = end
    except (struct.error, IndexError) as exc:
        raise RecordFormatError(f"truncated record at {pos}: {exc}") from None
    columns = list(zip(*heads)) if heads else [()] * _COLUMNS_HEAD_FIELDS
    return RecordColumns(
        queue_ids=columns[2],
        queue_offsets=columns[3],
        phys_offsets=columns[4],
        sys_flags=columns[5],
        born_timestamps_ms=columns[6],
        store_timestamps_ms=columns[7],
        store_hosts=columns[8],
        reconsume_times=columns[9],
        bodies=bodies,
        properties=properties,
    )
