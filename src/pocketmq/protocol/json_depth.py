"""How deep a JSON text nests, found without parsing it: a parser recurses once per level, so a small hostile
text (100,000 ``[``) costs a parser its stack, or a RecursionError, before it can say no.

Strings are cut out first (brackets inside them do not nest), then the running sum of +1 per opening and -1 per
closing bracket is taken in C-speed passes. A text with at most ``limit`` opening brackets cannot nest deeper,
which settles every ordinary header with two counts.
"""

from __future__ import annotations

import re
from itertools import accumulate

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_too_deep(text: str, limit: int) -> bool:
    """Whether the JSON ``text`` nests more than ``limit`` arrays and objects deep (an unterminated string's
    brackets count: such a text does not parse anyway)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKETS.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit
