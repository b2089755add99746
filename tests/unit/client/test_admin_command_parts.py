"""The pure parts of the operator's commands: times, queue offsets, how a body is shown."""

from __future__ import annotations

from datetime import datetime

import pytest

from pocketmq.common.errors import BadRequestError
from pocketmq.ops.message_json import body_preview, body_text, hex_dump
from pocketmq.ops.message_query import parse_queue_offset
from pocketmq.ops.time_text import parse_time_ms, parse_time_range


def test_times_are_epoch_ms_or_iso_and_ranges_may_be_open():
    assert parse_time_ms("1700000000123") == 1700000000123
    assert parse_time_ms("2026-05-01T09:00:00+00:00") == 1777626000000
    assert parse_time_ms("2026-05-01T09:00") == int(datetime(2026, 5, 1, 9, 0).timestamp() * 1000)  # local
    assert parse_time_range("5..9", now_ms=100) == (5, 9)
    assert parse_time_range("..9", now_ms=100) == (0, 9)
    assert parse_time_range("5..", now_ms=100) == (5, 100)
    for bad in ("yesterday..", "9..5", "5", "..x"):
        with pytest.raises(BadRequestError):
            parse_time_range(bad, now_ms=100)


def test_queue_offsets_name_the_broker_or_not():
    assert parse_queue_offset("3:1200") == (None, 3, 1200)
    assert parse_queue_offset("broker-a:3:1200") == ("broker-a", 3, 1200)
    for bad in ("3", "a:b", "-1:0", "1:-5"):
        with pytest.raises(BadRequestError):
            parse_queue_offset(bad)


def test_bodies_show_as_pretty_json_text_or_a_hex_dump():
    assert body_text(b'{"a":[1]}') == ("json", '{\n  "a": [\n    1\n  ]\n}')
    assert body_text("héllo".encode()) == ("text", "héllo")
    kind, dump = body_text(bytes(range(250, 256)) + b"xyz" + bytes(10))
    assert kind == "hex"
    assert dump.splitlines() == [
        "00000000  fa fb fc fd fe ff 78 79 7a 00 00 00 00 00 00 00  ......xyz.......",
        "00000010  00 00 00                                         ...",
    ]
    assert hex_dump(b"") == ""
    assert body_text(b"\x00\x01ok")[0] == "hex"  # UTF-8, but control characters
    assert body_text(b"line 1\n\tline 2") == ("text", "line 1\n\tline 2")
    assert body_preview(b'{"a":\n 1}', 40) == '{"a": 1}'
    assert body_preview(b"\x00\x01ok", 40) == "hex:00016f6b"
    assert body_preview(b"x" * 50, 10) == "xxxxxxxxx~"
