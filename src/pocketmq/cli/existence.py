"""One rule for a topic or group that a command names and that does not exist: the command fails with one line,
``topic 'NAME' does not exist ...`` or ``subscription group 'NAME' does not exist``, exit status 1, and the look
creates nothing. Only ``send`` (a topic, when the brokers allow it) and the create commands make what is not
there.

- ``require_topic(admin, topic)``: the name server has a route of the topic (asked without auto-creation, as
  every read of a topic is).
- ``require_group(admin, group)``: a broker has the group's config, or the name server a dead-letter or retry
  topic of it (a group whose consumers ran with subscription-group auto-creation off has no config); the web
  console's rule too (ops/dead_letters.py).
"""

from __future__ import annotations

from pocketmq.client.admin import AsyncAdmin
from pocketmq.ops.dead_letters import require_group

__all__ = ["require_group", "require_topic"]


async def require_topic(admin: AsyncAdmin, topic: str) -> None:
    """TopicNotExistError for a topic without a route."""
    await admin.instance.fetch_route_data(admin.namespace.wrap(topic), auto_create=False)
