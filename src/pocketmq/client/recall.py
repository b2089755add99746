"""Recall of a delayed message by the handle its send returned (RocketMQ 5's ``recallMessage``).

The handle names the broker that holds the message (RocketMQ's ``v1`` layout: URL-safe base64 of ``v1 <topic>
<broker name> <deliver ms> <message id> ...``); the request goes to that broker's master as RECALL_MESSAGE.
The broker checks the handle (PocketMQ signs its handles) and answers ILLEGAL_OPERATION for one it did not
issue or for a message already due; both raise ``RemoteServerError``.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from pocketmq.common.errors import ClientError
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.replies import expect_success

if TYPE_CHECKING:
    from pocketmq.client.instance import ClientInstance


def recall_handle_target(handle: str) -> tuple[str, str]:
    """(topic, broker name) a recall handle names; ClientError when it is not a recall handle."""
    try:
        items = base64.urlsafe_b64decode(handle.encode()).decode().split(" ")
    except (binascii.Error, ValueError):
        items = []
    if len(items) < 5 or items[0] != "v1":
        raise ClientError("recall handle is invalid")
    return items[1], items[2]


async def recall_message(
    instance: ClientInstance, producer_group: str, topic: str, handle: str, timeout_s: float
) -> str:
    """Recall the delayed message ``handle`` names (sent to ``topic``); returns its message id."""
    _, broker_name = recall_handle_target(handle)
    route = await instance.route(topic, auto_create=False)
    address = route.master_addrs.get(broker_name) or instance.broker_addr(broker_name)
    request = RemotingCommand.request(
        RequestCode.RECALL_MESSAGE,
        {"producerGroup": producer_group, "topic": topic, "recallHandle": handle, "bname": broker_name},
    )
    reply = expect_success(await instance.remoting.invoke(address, request, timeout_s))
    return reply.ext_fields.get("msgId", "")
