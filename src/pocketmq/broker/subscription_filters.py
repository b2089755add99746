"""What a read keeps of a subscription's expression: TAG expressions by the consume queue's tags code, SQL92
expressions by the properties of each record (docs/filter.md), both for pulls and POP.

A subscription's expression is compiled once: ``SubscriptionFilters`` keeps the compiled filters of recent
expressions by (type, text), so the many pulls of a subscription share one. SQL92 expressions need
``enable_property_filter`` (RocketMQ's ``enablePropertyFilter``), read on every compile so a dynamic change
applies to the next pull; while it is off an SQL92 subscription is refused with SUBSCRIPTION_PARSE_FAILED.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.common.errors import SubscriptionParseError
from pocketmq.common.record import property_keys, record_property_values
from pocketmq.common.sql_filter import compile_sql
from pocketmq.store.tags import tags_code_filter

TAG = "TAG"
SQL92 = "SQL92"
MAX_CACHED_FILTERS = 1024  # distinct expressions kept compiled; a subscription's is used again on its next pull


@dataclass(frozen=True, slots=True)
class ReadFilter:
    """The two filters of ``MessageStore.get_messages``: None keeps everything."""

    tags_code: Callable[[int], bool] | None = None
    record: Callable[[bytes], bool] | None = None


EVERY_MESSAGE = ReadFilter()


def expression_type_of(name: str | None) -> str:
    """The expression type a client names: RocketMQ reads none or an empty one as TAG; gRPC says SQL."""
    if not name or name.upper() == TAG:
        return TAG
    if name.upper() in (SQL92, "SQL"):
        return SQL92
    raise SubscriptionParseError(f"expression type {name!r} is not one of TAG, SQL92")


class SubscriptionFilters:
    def __init__(self, property_filter_enabled: Callable[[], bool] = lambda: True):
        self._enabled = property_filter_enabled
        self._cache: OrderedDict[tuple[str, str | None], ReadFilter] = OrderedDict()

    def read_filter(self, expression_type: str | None, expression: str | None) -> ReadFilter:
        """What a read of this subscription keeps; SubscriptionParseError (with the fault's position) for an
        expression that does not compile, or for SQL92 while property filters are off."""
        kind = expression_type_of(expression_type)
        if kind == SQL92 and not self._enabled():
            raise SubscriptionParseError(
                "SQL92 filtering is off on this broker (enable_property_filter=false): subscribe by TAG"
            )
        key = (kind, expression)
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
            return found
        compiled = _compile(kind, expression)
        self._cache[key] = compiled
        if len(self._cache) > MAX_CACHED_FILTERS:
            self._cache.popitem(last=False)
        return compiled

    def check(self, expression_type: str | None, expression: str | None) -> None:
        """Raise what a read with this subscription would raise (heartbeats and the client check ask it)."""
        self.read_filter(expression_type, expression)


def _compile(kind: str, expression: str | None) -> ReadFilter:
    if kind == TAG:
        keep = tags_code_filter(expression)
        return EVERY_MESSAGE if keep is None else ReadFilter(tags_code=keep)
    if expression is None or not expression.strip():
        raise SubscriptionParseError("an SQL92 subscription needs an expression")
    compiled = compile_sql(expression)
    matches, keys = compiled.matches, property_keys(compiled.property_names)
    return ReadFilter(record=lambda record: matches(record_property_values(record, keys)))
