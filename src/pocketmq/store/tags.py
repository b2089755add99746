"""The tags code a consume queue unit carries: Java's ``String.hashCode`` of the message's tag.

RocketMQ stores ``tags.hashCode()`` (a signed 32-bit int, widened to the unit's int64 field) so a pull with
a tag filter can skip records without reading the commit log; the broker compares the hash codes of the
subscription's tags with it and, as RocketMQ does, accepts the rare collision. A message without a tag gets 0.
``tags_code_filter`` turns a TAG subscription into that comparison, for pulls and POP alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache

from pocketmq.common.tag_expression import parse_tag_expression

_MASK32 = 0xFFFFFFFF


@lru_cache(maxsize=4096)  # tags repeat across messages: the cache makes the put path a dict lookup
def tag_hash_code(tag: str) -> int:
    """``tag.hashCode()`` as Java computes it: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    wrapped to a signed 32-bit int."""
    units: Iterable[int]
    if tag.isascii():
        units = tag.encode("ascii")
    else:
        raw = tag.encode("utf-16-be")  # characters outside the BMP become two surrogate units, as in Java
        units = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]
    h = 0
    for unit in units:
        h = (31 * h + unit) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def tags_code_filter(expression: str | None) -> Callable[[int], bool] | None:
    """What a read with tag expression ``expression`` keeps, by a unit's tags code (``get_messages``'s
    ``tag_filter``); None when it subscribes to every tag."""
    tags = parse_tag_expression(expression)
    if tags is None:
        return None
    return frozenset(tag_hash_code(t) for t in tags).__contains__
