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

from pocketmq.broker.dynamic_config import DYNAMIC_FIELDS
from pocketmq.cli.output import add_action, emit, json_line, print_rows, run_admin
from pocketmq.client.admin import AsyncAdmin, BrokerAddress
from pocketmq.common.errors import ClientError
from pocketmq.ops.broker_settings import change_setting, checked_change, setting_name

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


def _label(broker: BrokerAddress) -> str:
    return f"{broker.broker_name}/{broker.broker_id} {broker.addr}"


def set_config(args) -> int:
    name = checked_change(args.key, args.value)

    async def action(admin: AsyncAdmin) -> None:
        brokers = await admin.brokers(args.broker)
        failed = await change_setting(admin, brokers, name, args.value)
        for broker in brokers:
            if broker not in failed:
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
                + "; ".join(f"{_label(b)} ({r})" for b, r in failed.items())
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
