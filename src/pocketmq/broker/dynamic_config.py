"""Changing a running broker's configuration (UPDATE_BROKER_CONFIG): which settings may change, and the rule.

``changed_config`` is pure: it takes the current config and ``key -> text`` changes (PocketMQ field names or
their RocketMQ ``broker.conf`` aliases), checks them exactly as ``load_config`` checks a file, and returns
the new config. Unknown keys, bad values and settings that only take effect at a restart (ports, data
directory, names) are refused, all problems at once, and nothing changes.
"""

from __future__ import annotations

import dataclasses

from pocketmq.broker.config import BrokerConfig
from pocketmq.common.config import load_config
from pocketmq.errors import BadRequestError, ConfigError

# Settings the services read on every request, so a new value applies at once.
DYNAMIC_FIELDS = frozenset({
    "auto_create_topic_enable",
    "auto_create_subscription_group",
    "default_topic_queue_nums",
    "max_properties_bytes",
    "long_polling_enable",
    "short_polling_ms",
})


def changed_config(current: BrokerConfig, changes: dict[str, str]) -> BrokerConfig:
    """``current`` with ``changes`` applied; BadRequestError listing every refused change."""
    base = {f.name: getattr(current, f.name) for f in dataclasses.fields(BrokerConfig)}
    try:
        # The current values go in as overrides too, so the result differs from ``current`` only by ``changes``.
        candidate = load_config(BrokerConfig, env={}, overrides={**base, **changes})
    except ConfigError as exc:
        raise BadRequestError(str(exc)) from None
    static = sorted(name for name in base if getattr(candidate, name) != base[name] and name not in DYNAMIC_FIELDS)
    if static:
        raise BadRequestError(f"settings {', '.join(static)} take effect only at a restart: change them in the "
                              f"config file (dynamic settings: {', '.join(sorted(DYNAMIC_FIELDS))})")
    return candidate


def config_properties(config: BrokerConfig) -> dict[str, str]:
    """Every setting as text, RocketMQ's GET_BROKER_CONFIG form (``key=value`` lines)."""
    result = {}
    for f in dataclasses.fields(BrokerConfig):
        value = getattr(config, f.name)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif value is None:
            text = ""
        elif hasattr(value, "value") and not isinstance(value, (int, float)):
            text = str(value.value)  # enums
        else:
            text = str(value)
        result[f.name] = text
    return result
