"""Broker settings changed at run time (``pocketmq config set``, the console's config page): the change is
checked here first (an unknown key, a bad value or a setting that needs a restart changes nothing anywhere),
then made on the first broker alone, then on the others."""

from __future__ import annotations

import asyncio

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.dynamic_config import DYNAMIC_FIELDS, changed_config

__all__ = ["DYNAMIC_FIELDS", "change_setting", "checked_change", "setting_name"]
from pocketmq.client.admin import AsyncAdmin, BrokerAddress
from pocketmq.common.config import field_name
from pocketmq.common.errors import BadRequestError


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


async def change_setting(
    admin: AsyncAdmin, brokers: list[BrokerAddress], name: str, value: str
) -> dict[BrokerAddress, BaseException]:
    """Set ``name`` (a checked change) on ``brokers``; the brokers that refused it, with why. The first broker
    answers alone: if it refuses (an older version, say), it raises and nothing changed anywhere."""
    await admin.update_broker_config(brokers[0].addr, {name: value})
    results = await asyncio.gather(
        *(admin.update_broker_config(b.addr, {name: value}) for b in brokers[1:]), return_exceptions=True
    )
    return {b: r for b, r in zip(brokers[1:], results) if isinstance(r, BaseException)}
