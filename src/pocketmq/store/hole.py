"""Holes: what a master ships in place of corrupt commit log bytes, so replication goes past them.

A slave's log must keep the master's phys offsets, and a master cannot hand on a record that fails its
CRC32C. So for a stretch of its log that holds no valid frame (``CommitLog.bad_region_end``) the master
sends a *hole frame* of exactly the stretch's length: a blank frame with its own mark, which names the
queue slots (topic, queue id, queue offset) of the records it stands for. The slave stores the hole, not
the bytes, and writes a hole unit (``consume_queue.HOLE_UNIT_SIZE``) for each slot, so every queue offset the
master gave out stays taken on the slave and no reader there takes the hole for a message.

Byte layout (big-endian; ``size`` is the whole frame, at least ``HOLE_MIN_SIZE``)::

    int32 -size   uint32 HOLE_MARK   uint32 crc32c(slots)   int32 slots_len   slots   zeros
    slots: int16 count, then per slot: int8 topic_len, topic (UTF-8), int32 queue_id, int64 queue_offset

A stretch longer than a pull's ``max_bytes`` goes as several holes (``hole_pieces``), each slot in the piece
that holds the record's first byte. Pure: no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

HOLE_MARK = 0x401EF1A7  # a blank frame's second field is BLANK_MARK; a hole's is this
_HEADER = struct.Struct(">iIIi")  # -size, mark, crc32c(slots), slots_len
HOLE_MIN_SIZE = _HEADER.size  # 16
_COUNT = struct.Struct(">h")
_SLOT_TAIL = struct.Struct(">iq")  # queue_id, queue_offset
MAX_SLOTS = 32_767


@dataclass(frozen=True, slots=True)
class QueueSlot:
    """Where a record sits in its consume queue: one a hole stands for, or one a corrupt stretch holds
    (``verify.py``)."""

    topic: str
    queue_id: int
    queue_offset: int


def encode_hole(size: int, slots: list[QueueSlot]) -> tuple[bytes, list[QueueSlot]]:
    """A hole frame of ``size`` bytes (>= HOLE_MIN_SIZE) and the slots it names: all of ``slots`` that fit,
    in order (the caller logs any left out)."""
    room = size - HOLE_MIN_SIZE - _COUNT.size
    payload = bytearray()
    kept: list[QueueSlot] = []
    for slot in slots[:MAX_SLOTS]:
        topic = slot.topic.encode()
        encoded = bytes((len(topic),)) + topic + _SLOT_TAIL.pack(slot.queue_id, slot.queue_offset)
        if len(payload) + len(encoded) > room:
            break
        payload += encoded
        kept.append(slot)
    slots_bytes = _COUNT.pack(len(kept)) + payload if room >= 0 else b""
    header = _HEADER.pack(-size, HOLE_MARK, crc32c(slots_bytes), len(slots_bytes))
    return header + slots_bytes + bytes(size - len(header) - len(slots_bytes)), kept


def parse_hole_slots(buf, pos: int, size: int) -> tuple[QueueSlot, ...] | None:
    """The slots of the hole frame of ``size`` bytes at ``buf[pos:]`` (its mark already checked), None when it
    is not a valid hole."""
    if size < HOLE_MIN_SIZE:
        return None
    _neg_size, _mark, crc, slots_len = _HEADER.unpack_from(buf, pos)
    start = pos + HOLE_MIN_SIZE
    if slots_len < 0 or HOLE_MIN_SIZE + slots_len > size:
        return None
    slots_bytes = buf[start : start + slots_len]
    if crc32c(slots_bytes) != crc:
        return None
    if not slots_len:
        return ()
    try:
        return _decode_slots(bytes(slots_bytes))
    except (struct.error, UnicodeDecodeError, IndexError):
        return None


def _decode_slots(data: bytes) -> tuple[QueueSlot, ...]:
    (count,) = _COUNT.unpack_from(data, 0)
    pos = _COUNT.size
    slots = []
    for _ in range(count):
        topic_len = data[pos]
        topic = data[pos + 1 : pos + 1 + topic_len].decode()
        queue_id, queue_offset = _SLOT_TAIL.unpack_from(data, pos + 1 + topic_len)
        slots.append(QueueSlot(topic, queue_id, queue_offset))
        pos += 1 + topic_len + _SLOT_TAIL.size
    if pos != len(data):
        raise IndexError("trailing bytes after the slots")
    return tuple(slots)


def hole_piece_end(start: int, region_end: int, max_bytes: int) -> int:
    """Where the hole that begins a bad region's rest ``[start, region_end)`` ends: the whole rest when it is
    at most ``max_bytes`` (or too short to split), else a piece of about ``max_bytes`` that leaves at least a
    hole's minimum for the next piece."""
    length = region_end - start
    piece = max(max_bytes, HOLE_MIN_SIZE)
    if length <= piece or length < 2 * HOLE_MIN_SIZE:
        return region_end
    return start + min(piece, length - HOLE_MIN_SIZE)


def slots_text(slots) -> str:
    """``topic/queue id@queue offset`` of each slot, comma separated (``-`` for none): for logs and the CLI."""
    return ",".join(f"{s.topic}/{s.queue_id}@{s.queue_offset}" for s in slots) or "-"
