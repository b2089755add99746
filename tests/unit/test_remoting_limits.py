"""The remoting limits' pure parts: the watchdog's decisions in virtual time, the rate-limited log, the frame checks
at decode time, the JSON depth scan and the BATCH_ACK bit set walk (linear and bounded)."""

from __future__ import annotations

import base64
import json
import logging
import struct
import time

import pytest

from pocketmq.common.errors import LimitExceededError
from pocketmq.protocol import limits as L
from pocketmq.protocol.command import FrameDecoder, MalformedFrameError, RemotingCommand
from pocketmq.protocol.json_depth import json_too_deep
from pocketmq.protocol.limits import ConnectionLimits, watchdog_verdict
from pocketmq.runtime.rate_limited_log import RateLimitedLog
from pocketmq.server.remoting_pop import bit_set, set_bit_indexes

LIMITS = ConnectionLimits(frame_receive_timeout_ms=2_000, idle_timeout_ms=10_000)


def json_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


# -- watchdog ------------------------------------------------------------------------------------------------------
def test_an_idle_connection_closes_at_its_idle_deadline_and_not_before():
    assert watchdog_verdict(LIMITS, 109.9, 100.0, None, busy=False) == L.WatchdogVerdict(None, 110.0)
    assert watchdog_verdict(LIMITS, 110.0, 100.0, None, busy=False).close_for == L.IDLE_TIMEOUT


def test_a_connection_with_requests_in_flight_is_not_idle():
    verdict = watchdog_verdict(LIMITS, 500.0, 100.0, None, busy=True)  # a long poll, silent for 400 s
    assert verdict == L.WatchdogVerdict(None, 510.0)


def test_an_unfinished_frame_closes_at_its_deadline_even_while_bytes_trickle_in():
    # bytes arrived 0.1 s ago (not idle), but the frame began 2 s ago: slow loris
    assert watchdog_verdict(LIMITS, 102.0, 101.9, 100.0, busy=False).close_for == L.FRAME_RECEIVE_TIMEOUT
    assert watchdog_verdict(LIMITS, 101.0, 100.9, 100.0, busy=True) == L.WatchdogVerdict(None, 102.0)


def test_without_deadlines_nothing_is_watched():
    assert watchdog_verdict(L.CLIENT_LIMITS, 1e9, 0.0, 0.0, busy=False) == L.WatchdogVerdict(None, None)


# -- rate-limited log ----------------------------------------------------------------------------------------------
def test_the_log_writes_one_line_per_key_and_interval_then_says_how_many_it_left_out(caplog):
    now = [0.0]
    rate_limited = RateLimitedLog(logging.getLogger("t"), 10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING):
        assert rate_limited.warning("a", "event=x n=%d", 1)
        assert not rate_limited.warning("a", "event=x n=%d", 2)
        assert not rate_limited.warning("a", "event=x n=%d", 3)
        assert rate_limited.warning("b", "event=y")  # another key has its own allowance
        now[0] = 10.0
        assert rate_limited.warning("a", "event=x n=%d", 4)
    assert [r.getMessage() for r in caplog.records] == ["event=x n=1", "event=y", "event=x n=4 suppressed=2"]


# -- frames --------------------------------------------------------------------------------------------------------
def test_a_frame_over_the_limit_is_refused_from_its_length_alone():
    decoder = FrameDecoder(ConnectionLimits(max_frame_bytes=1024))
    with pytest.raises(MalformedFrameError) as refused:
        decoder.feed(struct.pack(">i", 1025))
    assert refused.value.limit == L.FRAME_BYTES


def test_a_header_over_the_limit_is_refused_before_the_frame_is_in():
    decoder = FrameDecoder(ConnectionLimits(max_header_bytes=100))
    with pytest.raises(MalformedFrameError) as refused:
        decoder.feed(struct.pack(">ii", 10_000, 5_000) + b"{")
    assert refused.value.limit == L.HEADER_BYTES


def test_a_deep_json_header_is_refused_without_parsing_it():
    deep = b'{"code":10,"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(MalformedFrameError) as refused:
        FrameDecoder(ConnectionLimits()).feed(json_frame(deep))
    assert refused.value.limit == L.JSON_DEPTH


@pytest.mark.parametrize("code", [b"1e400", b"-1e400", b"NaN", b"4294967296", b"10.5", b"true", b'"x"', b"{}"])
def test_header_numbers_that_are_no_int32_are_malformed(code):
    with pytest.raises(MalformedFrameError):
        FrameDecoder().feed(json_frame(b'{"code":' + code + b',"opaque":1}'))


def test_header_numbers_in_lenient_forms_still_decode():
    (cmd,) = FrameDecoder().feed(json_frame(b'{"code":"10","opaque":7.0,"flag":0,"version":317}'))
    assert (cmd.code, cmd.opaque) == (10, 7)


def test_an_ordinary_request_passes_the_server_limits():
    cmd = RemotingCommand.request(10, {"b": "topic", "i": "KEYS\x01k1 k2\x02TAGS\x01{[x]}\x02"}, b"body")
    (decoded,) = FrameDecoder(ConnectionLimits()).feed(cmd.encode())
    assert decoded.ext_fields == cmd.ext_fields


@pytest.mark.parametrize(
    "text,limit,deep",
    [
        ('{"a":{"b":[1]}}', 3, False),
        ('{"a":{"b":[1]}}', 2, True),
        ('{"a":"[[[[{{{{"}', 1, False),
        ('{"a":"\\"[[[["}', 1, False),
        ("[" * 40, 32, True),
        ("[]" * 40, 1, False),
    ],
)
def test_json_depth(text, limit, deep):
    assert json_too_deep(text, limit) is deep


# -- BATCH_ACK bit sets --------------------------------------------------------------------------------------------
def test_bit_sets_in_both_forms_give_the_acked_indexes():
    bits = 1 << 0 | 1 << 5 | 1 << 70
    as_bytes = base64.b64encode(bits.to_bytes(9, "little")).decode()
    as_words = [bits & (2**64 - 1), bits >> 64]
    assert bit_set(as_bytes) == bit_set(as_words) == bits
    assert set_bit_indexes(bits) == [0, 5, 70]
    assert bit_set([-1]) == 2**64 - 1  # Java's long words are signed


def test_a_bit_set_of_more_messages_than_a_ck_holds_is_refused_at_once():
    started = time.perf_counter()
    with pytest.raises(LimitExceededError) as refused:
        set_bit_indexes(bit_set(base64.b64encode(b"\xff" * 128 * 1024).decode()))
    with pytest.raises(LimitExceededError):
        set_bit_indexes(bit_set(json.loads(json.dumps([-1] * 16 * 1024))))
    assert refused.value.limit == L.BATCH_ACK_BITS
    assert time.perf_counter() - started < 0.5  # was 18.8 s for the first


def test_a_long_sparse_bit_set_is_walked_in_a_few_steps():
    bits = sum(1 << (i * 32_768) for i in range(32))  # 32 acks spread over 128 KiB
    started = time.perf_counter()
    assert set_bit_indexes(bit_set(base64.b64encode(bits.to_bytes(128 * 1024, "little")).decode())) == [
        i * 32_768 for i in range(32)
    ]
    assert time.perf_counter() - started < 0.5
