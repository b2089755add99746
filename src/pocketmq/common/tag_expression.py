"""Tag expressions (``a || b``): which tags a TAG subscription names, read the same way by broker and SDK.

The grammar and its meaning are RocketMQ's (``FilterAPI.buildSubscriptionData``):

- no expression, an empty one or ``*`` subscribes to every tag;
- any other expression is split on ``||``; each part is trimmed and empty parts are skipped; the parts left are
  the tags subscribed to;
- a ``*`` inside a list is not a wildcard but a tag named ``*``: ``a || *`` receives the messages tagged ``a``
  (or tagged ``*``), not every message.

An expression that names no tag once trimmed (``" "``, ``" * "``, ``"||"``) subscribes to every tag. RocketMQ
compares the untrimmed text with ``*`` and there such an expression is a list of no tag (or of the tag ``*``)
that no message matches; PocketMQ has always read these as ``*``, and its clients send ``*`` for them.
"""

from __future__ import annotations

SUBSCRIBE_ALL = "*"
TAG_SEPARATOR = "||"


def parse_tag_expression(expression: str | None) -> frozenset[str] | None:
    """The tags ``expression`` subscribes to; None when it subscribes to every tag (never an empty set)."""
    if expression is None:
        return None
    tags = frozenset(part.strip() for part in expression.split(TAG_SEPARATOR)) - {""}
    if not tags or expression.strip() == SUBSCRIBE_ALL:
        return None
    return tags
