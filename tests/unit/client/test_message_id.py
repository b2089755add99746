"""Producer message ids (UNIQ_KEY): RocketMQ's layout, unique and ordered within a process."""

from __future__ import annotations

import datetime

import pytest

from pocketmq.client.message_id import MessageIdGenerator, month_start_ms, parse_message_id


def test_layout_round_trips_through_parse():
    gen = MessageIdGenerator("10.1.2.3", 0x12345, 0xDEADBEEF)
    now_ms = month_start_ms(1_700_000_000_000) + 5_000
    first, second = gen.next_id(now_ms), gen.next_id(now_ms)
    assert len(first) == 32 and first == first.upper() and first[:20] == gen.prefix_hex
    parts = parse_message_id(second)
    assert (parts.ip, parts.pid, parts.random_part, parts.ms_since_month_start) == (
        "10.1.2.3",
        0x2345,
        0xDEADBEEF,
        5_000,
    )
    assert parts.counter == parse_message_id(first).counter + 1


def test_ids_are_unique_over_many_calls_in_one_millisecond():
    gen = MessageIdGenerator("127.0.0.1", 1, 2)
    ids = {gen.next_id(1_700_000_000_000) for _ in range(50_000)}
    assert len(ids) == 50_000


def test_processes_differ_in_the_prefix():
    assert MessageIdGenerator("127.0.0.1", 1, 2).prefix_hex != MessageIdGenerator("127.0.0.1", 2, 2).prefix_hex


def test_month_start_is_the_first_local_midnight_of_the_month():
    now_ms = 1_700_000_000_000
    start = datetime.datetime.fromtimestamp(month_start_ms(now_ms) / 1000)
    assert (start.day, start.hour, start.minute, start.second) == (1, 0, 0, 0)
    assert month_start_ms(now_ms) <= now_ms < month_start_ms(now_ms) + 31 * 86_400_000


def test_time_part_restarts_in_a_new_month():
    gen = MessageIdGenerator("127.0.0.1", 1, 2)
    start = month_start_ms(1_700_000_000_000)
    next_month = month_start_ms(start + 32 * 86_400_000)
    gen.next_id(start + 10)
    assert parse_message_id(gen.next_id(next_month + 7)).ms_since_month_start == 7


@pytest.mark.parametrize("bad", ["", "ABC", "Z" * 32])
def test_parse_rejects_what_is_not_32_hex_digits(bad):
    with pytest.raises(ValueError):
        parse_message_id(bad)
