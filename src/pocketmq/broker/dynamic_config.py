"""Changing a running broker's configuration (UPDATE_BROKER_CONFIG): which settings may change, and the rule.

``changed_config`` is pure: it takes the current config and ``key -> text`` changes (PocketMQ field names or
their RocketMQ ``broker.conf`` aliases), checks them exactly as ``load_config`` checks a file, and returns
the new config. Unknown keys, bad values and settings that only take effect at a restart (ports, data
directory, names) are refused, all problems at once, and nothing changes.

Accepted changes persist in ``<data dir>/config/dynamic_config.json`` (field name -> text, the dynamic
settings only), written atomically before they apply, and ``with_persisted_changes`` lays them over the
configuration a broker starts with. They are the *top* layer: defaults < config file < ``POCKETMQ_*`` env <
CLI flags < persisted run-time changes. Why: a change made at run time must survive a restart made with the
same command line (which often sets the same key, e.g. a short backoff table in a test, or the fleet's
usual settings in a service unit); otherwise a restart would silently undo what the operator set. A broker
that starts with a persisted value different from its configured one logs ``event=dynamic_config_applied``
naming both. To go back, ``config set`` the key again (or delete it from the file while the broker is down).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from pocketmq.broker.config import BrokerConfig
from pocketmq.common.config import field_name, load_config
from pocketmq.common.errors import BadRequestError, ConfigError
from pocketmq.runtime.files import atomic_write_json, load_json

log = logging.getLogger(__name__)

# Settings the services read on every request, so a new value applies at once.
DYNAMIC_FIELDS = frozenset(
    {
        "auto_create_topic_enable",
        "auto_create_subscription_group",
        "default_topic_queue_nums",
        "max_properties_bytes",
        "long_polling_enable",
        "short_polling_ms",
        "enable_property_filter",  # SubscriptionFilters reads it at each pull and pop
        "pop_ck_rewrite_backoff_ms",  # revive reads ReviveService.policy at each CK
        "pop_ck_rewrite_ending",
        "pop_ck_rewrite_max_total_ms",
        "remote_read_timeout_ms",  # ReaderRouter.configure_remote: the remote readers built and later ones
        "remote_read_retry_unreachable_ms",
        "remote_read_retry_busy_ms",
        "remote_read_retry_no_permission_ms",
        "remote_read_retry_other_ms",
        "breaker_failure_threshold",  # BreakerBoard.configure: existing breakers and later ones
        "breaker_cool_down_ms",
        "enable_slave_acting_master",  # read from broker.config where they are decided
        "enable_remote_escape",
        "transaction_timeout_ms",  # the transaction service reads them each round and each send
        "transaction_check_interval_ms",
        "transaction_check_max",
        "transaction_max_recovery_s",
        "reject_transaction_message",
        "trace_enabled",  # the tracer reads both at each event
        "trace_sample_ratio",
    }
)
DYNAMIC_CONFIG_FILE = "dynamic_config.json"


def changed_config(current: BrokerConfig, changes: dict[str, str]) -> BrokerConfig:
    """``current`` with ``changes`` applied; BadRequestError listing every refused change."""
    base = {f.name: getattr(current, f.name) for f in dataclasses.fields(BrokerConfig)}
    try:
        # The current values go in as overrides too, so the result differs from ``current`` only by ``changes``.
        # A bad change is named as the setting it is, not as the flag of the same name (``option --foo``).
        candidate = load_config(
            BrokerConfig,
            env={},
            overrides={**base, **changes},
            override_sources=dict.fromkeys(changes, "new value"),
        )
    except ConfigError as exc:
        raise BadRequestError(str(exc)) from None
    static = sorted(name for name in base if getattr(candidate, name) != base[name] and name not in DYNAMIC_FIELDS)
    if static:
        raise BadRequestError(
            f"settings {', '.join(static)} take effect only at a restart: change them in the "
            f"config file (dynamic settings: {', '.join(sorted(DYNAMIC_FIELDS))})"
        )
    return candidate


def config_properties(config: BrokerConfig) -> dict[str, str]:
    """Every setting as text, RocketMQ's GET_BROKER_CONFIG form (``key=value`` lines)."""
    result = {}
    for f in dataclasses.fields(BrokerConfig):
        if f.metadata.get("secret"):
            continue  # secrets are never printed back (docs/security.md)
        value = getattr(config, f.name)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif value is None:
            text = ""
        elif isinstance(value, tuple):
            text = ",".join(str(item) for item in value)  # the form a change or a config file gives
        elif hasattr(value, "value") and not isinstance(value, (int, float)):
            text = str(value.value)  # enums
        else:
            text = str(value)
        result[f.name] = text
    return result


def dynamic_config_path(config: BrokerConfig) -> Path:
    return config.metadata_dir() / DYNAMIC_CONFIG_FILE


def with_persisted_changes(config: BrokerConfig) -> BrokerConfig:
    """``config`` with the run-time changes persisted in its data directory laid over it; ConfigError when
    the file holds something this version refuses (it names the file)."""
    path = dynamic_config_path(config)
    try:
        persisted = load_json(path, {})
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    if not persisted:
        return config
    if not isinstance(persisted, dict):
        raise ConfigError(f"{path}: expected a JSON object of setting -> value")
    try:
        new = changed_config(config, {str(k): str(v) for k, v in persisted.items()})
    except BadRequestError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    before, after = config_properties(config), config_properties(new)
    for name in sorted(n for n in after if after[n] != before[n]):
        log.info(
            "event=dynamic_config_applied key=%s configured=%s persisted=%s file=%s",
            name,
            before[name],
            after[name],
            path,
        )
    return new


def persist_changes(new: BrokerConfig, changes: dict[str, str]) -> None:
    """Record the dynamic settings ``changes`` named (as ``new`` holds them) in the data directory's file."""
    names = {name for key in changes if (name := field_name(BrokerConfig, key)) in DYNAMIC_FIELDS}
    if not names:
        return
    path = dynamic_config_path(new)
    persisted = load_json(path, {})
    text = config_properties(new)
    atomic_write_json(path, {**persisted, **{name: text[name] for name in sorted(names)}})
