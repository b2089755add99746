"""``pocketmq config set|get``: a running cluster's broker settings, changed without a restart.

- ``set KEY VALUE [--broker NAME]``: change a dynamic setting on every broker (masters and slaves) registered
  with the name server, or on the brokers of group NAME. The key is a ``BrokerConfig`` field or its
  ``broker.conf`` alias. The change is checked here first (an unknown key, a bad value or a setting that
  needs a restart changes nothing anywhere), then made on the first broker, then on the others; each broker
  applies it at once and keeps it in its data directory (docs/broker.md, "Changing settings at run time").
- ``get [KEY] [--broker NAME]``: the settings of each broker, one row per broker and setting, with whether
  the setting is dynamic.
"""

from __future__ import annotations

import asyncio

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.dynamic_config import DYNAMIC_FIELDS, changed_config
from pocketmq.cli.output import add_action, emit, json_line, print_rows, run_admin
from pocketmq.client.admin import AsyncAdmin, BrokerAddress
from pocketmq.common.config import field_name
from pocketmq.common.errors import BadRequestError, ClientError

COLUMNS = ["broker", "broker_id", "address", "key", "value", "dynamic"]


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "config", help="get and change broker settings at run time", description=__doc__.split("\n\n")[0]
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = add_action(
        actions, "set", "change a dynamic setting on every broker (or one group)", set_config, "key", "value"
    )
    p.add_argument("--broker", help="only the master and slaves of this broker group")
    p = add_action(actions, "get", "show settings of every broker (or one group)", get_config)
    p.add_argument("key", nargs="?", help="one setting (field name or broker.conf key); default: all")
    p.add_argument("--broker", help="only the master and slaves of this broker group")


def setting_name(key: str) -> str:
    """The ``BrokerConfig`` field ``key`` names; BadRequestError for an unknown key."""
    name = field_name(BrokerConfig, key)
    if name is None:
        raise BadRequestError(f"unknown setting {key!r} (pocketmq config get lists them)")
    return name


def checked_change(key: str, value: str) -> str:
    """The field name of a change that a broker will accept; BadRequestError (nothing sent) otherwise."""
    name = setting_name(key)
    if name not in DYNAMIC_FIELDS:
        raise BadRequestError(
            f"setting {name} takes effect only at a restart: change it in the config file "
            f"(dynamic settings: {', '.join(sorted(DYNAMIC_FIELDS))})"
        )
    changed_config(BrokerConfig(), {name: value})  # the value's type and range, as the brokers check them
    return name


def _label(broker: BrokerAddress) -> str:
    return f"{broker.broker_name}/{broker.broker_id} {broker.addr}"


def set_config(args) -> int:
    name = checked_change(args.key, args.value)

    async def action(admin: AsyncAdmin) -> None:
        brokers = await admin.brokers(args.broker)
        # The first broker answers alone: if it refuses (an older version, say), nothing changed anywhere.
        await admin.update_broker_config(brokers[0].addr, {name: args.value})
        results = await asyncio.gather(
            *(admin.update_broker_config(b.addr, {name: args.value}) for b in brokers[1:]), return_exceptions=True
        )
        failed = [(b, r) for b, r in zip(brokers[1:], results) if isinstance(r, BaseException)]
        for broker in brokers:
            if not any(b is broker for b, _ in failed):
                row = {
                    "broker": broker.broker_name,
                    "broker_id": broker.broker_id,
                    "address": broker.addr,
                    "key": name,
                    "value": args.value,
                }
                emit(json_line(row) if args.json else f"{_label(broker)}: {name}={args.value}")
        if failed:
            raise ClientError(
                f"{name} changed on {len(brokers) - len(failed)} of {len(brokers)} brokers; not on "
                + "; ".join(f"{_label(b)} ({r})" for b, r in failed)
            )

    return run_admin(args, action)


def get_config(args) -> int:
    name = setting_name(args.key) if args.key else None

    async def action(admin: AsyncAdmin) -> None:
        brokers = await admin.brokers(args.broker)
        configs = await asyncio.gather(*(admin.broker_config(b.addr) for b in brokers), return_exceptions=True)
        rows = [
            {
                "broker": broker.broker_name,
                "broker_id": broker.broker_id,
                "address": broker.addr,
                "key": key,
                "value": value,
                "dynamic": key in DYNAMIC_FIELDS,
            }
            for broker, config in zip(brokers, configs)
            if not isinstance(config, BaseException)
            for key, value in sorted(config.items())
            if name in (None, key)
        ]
        print_rows(args, rows, COLUMNS)
        failed = [(b, c) for b, c in zip(brokers, configs) if isinstance(c, BaseException)]
        if failed:
            raise ClientError("no answer from " + "; ".join(f"{_label(b)} ({c})" for b, c in failed))

    return run_admin(args, action)
