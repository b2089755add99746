"""When a delayed message is due: pure rules over its properties, ``now_ms`` and the broker's limits.

Properties that delay a message (RocketMQ's names):

- ``DELAY`` = a delay level 1..N of the level table (default RocketMQ's 18 levels "1s 5s 10s 30s 1m 2m 3m
  4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"); a level above N is clamped to N, as RocketMQ clamps it; a level
  wins over the timer properties (RocketMQ strips them when a level is set);
- ``TIMER_DELIVER_MS`` = an absolute epoch time in ms (what the official 5.x clients' delivery timestamp
  becomes); ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS`` = a delay from now.

Limits (PocketMQ's choice, documented in docs/retry.md): a delivery more than ``max_delay_ms`` ahead (3 days
by default, RocketMQ 5's ``timerMaxDelaySec``) is refused, on both front ends (the Apache proxy's 1 day is
not used: one rule for both protocols); a delivery time in the past by up to ``past_tolerance_ms`` (clock
skew between producer and broker) is delivered at once as a plain message, RocketMQ's behaviour; further in
the past it is refused, because such a time is almost surely a unit mistake (seconds for milliseconds).
Refusals are ``IllegalMessageError``: MESSAGE_ILLEGAL on remoting, ILLEGAL_DELIVERY_TIME on v2.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.common import properties as props
from pocketmq.common.errors import IllegalDeliveryTimeError

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
TIMER_PROPERTIES = (props.TIMER_DELIVER_MS, props.TIMER_DELAY_SEC, props.TIMER_DELAY_MS)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """``"1s 5s 1m"`` -> ``(1000, 5000, 60000)``; units ms, s, m, h, d. ValueError on anything else."""
    levels = []
    for item in text.split():
        number = item.rstrip("smhd")
        unit = item[len(number) :]
        if unit not in _UNIT_MS or not number.isdigit() or int(number) <= 0:
            raise ValueError(f"delay level {item!r} is not a positive number with a unit (ms, s, m, h, d)")
        levels.append(int(number) * _UNIT_MS[unit])
    if not levels:
        raise ValueError("the delay level table is empty")
    return tuple(levels)


def delay_levels_problem(text: str) -> str | None:
    """A config check: why ``text`` is not a delay level table, or None."""
    try:
        parse_delay_levels(text)
    except ValueError as exc:
        return str(exc)
    return None


@dataclass(frozen=True, slots=True)
class TimerLimits:
    levels_ms: tuple[int, ...] = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    max_delay_ms: int = 3 * 86_400_000
    past_tolerance_ms: int = 60_000

    def level_delay_ms(self, level: int) -> int:
        """The delay of ``level`` (1-based), clamped to the last level."""
        return self.levels_ms[min(level, len(self.levels_ms)) - 1]


def is_delayed(properties: dict[str, str]) -> bool:
    """Whether the properties ask for a delay at all (cheap: the send path calls it per message)."""
    return (
        props.DELAY_TIME_LEVEL in properties
        or props.TIMER_DELIVER_MS in properties
        or props.TIMER_DELAY_SEC in properties
        or props.TIMER_DELAY_MS in properties
    )


def deliver_time_ms(properties: dict[str, str], now_ms: int, limits: TimerLimits) -> int | None:
    """The epoch ms at which the message becomes visible, or None when it is due now (no delay, level <= 0,
    or a time in the past within tolerance). Raises IllegalMessageError for a refused delay."""
    level_text = properties.get(props.DELAY_TIME_LEVEL)
    if level_text is not None:
        level = _int_property(props.DELAY_TIME_LEVEL, level_text)
        return now_ms + limits.level_delay_ms(level) if level > 0 else None
    if props.TIMER_DELIVER_MS in properties:
        deliver_ms = _int_property(props.TIMER_DELIVER_MS, properties[props.TIMER_DELIVER_MS])
    elif props.TIMER_DELAY_SEC in properties:
        deliver_ms = now_ms + 1000 * _int_property(props.TIMER_DELAY_SEC, properties[props.TIMER_DELAY_SEC])
    elif props.TIMER_DELAY_MS in properties:
        deliver_ms = now_ms + _int_property(props.TIMER_DELAY_MS, properties[props.TIMER_DELAY_MS])
    else:
        return None
    if deliver_ms - now_ms > limits.max_delay_ms:
        raise IllegalDeliveryTimeError(
            f"delivery time {deliver_ms} is {deliver_ms - now_ms} ms ahead, more than the "
            f"max delay of {limits.max_delay_ms} ms"
        )
    if now_ms - deliver_ms > limits.past_tolerance_ms:
        raise IllegalDeliveryTimeError(
            f"delivery time {deliver_ms} is {now_ms - deliver_ms} ms in the past, more than "
            f"the tolerance of {limits.past_tolerance_ms} ms"
        )
    return deliver_ms if deliver_ms > now_ms else None


def _int_property(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise IllegalDeliveryTimeError(f"property {name}={text!r} is not an integer") from None
