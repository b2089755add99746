"""Times as operators type them in ``pocketmq message query --time`` and ``pocketmq group reset-offset
--to-time``: epoch milliseconds, or ISO-8601 (local time unless the text names a zone)."""

from __future__ import annotations

from datetime import datetime

from pocketmq.common.errors import BadRequestError


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 time (local unless it names a zone)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise BadRequestError(f"time {text!r}: expected epoch milliseconds or ISO-8601 (2026-05-01T09:00)") from None


def parse_time_range(text: str, now_ms: int) -> tuple[int, int]:
    """``FROM..TO`` as (begin, end) ms; an end left out is the beginning of time, or now."""
    begin, sep, end = text.partition("..")
    if not sep:
        raise BadRequestError(f"time range {text!r}: expected FROM..TO")
    begin_ms = parse_time_ms(begin) if begin.strip() else 0
    end_ms = parse_time_ms(end) if end.strip() else now_ms
    if begin_ms > end_ms:
        raise BadRequestError(f"time range {text!r} ends before it begins")
    return begin_ms, end_ms
