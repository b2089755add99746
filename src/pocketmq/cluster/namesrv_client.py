"""The broker's client of its name servers: routes and cluster info, for the front ends that need them.

The gRPC front end answers QueryRoute from a name server's route (every broker of the topic, not only this
one). Name servers are tried in turn, starting with the one that answered last.
"""

from __future__ import annotations

from pocketmq.common.errors import RemotingError, ServiceNotAvailableError, TopicNotExistError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.namesrv_headers import GetRouteInfoRequestHeader
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.route import ClusterInfo, TopicRouteData
from pocketmq.protocol.transport import RemotingClient


class NamesrvClient:
    def __init__(self, namesrv_addrs: list[str], remoting: RemotingClient, *, timeout_s: float = 3.0):
        self._addrs = list(namesrv_addrs)
        self._remoting = remoting
        self._timeout_s = timeout_s
        self._last_good = 0

    @property
    def addrs(self) -> list[str]:
        return list(self._addrs)

    async def _invoke(self, code: int, fields: dict | None = None) -> RemotingCommand:
        if not self._addrs:
            raise ServiceNotAvailableError("this broker knows no name server")
        last_error: Exception | None = None
        for step in range(len(self._addrs)):
            index = (self._last_good + step) % len(self._addrs)
            try:
                response = await self._remoting.invoke(
                    self._addrs[index], RemotingCommand.request(code, fields), self._timeout_s
                )
            except RemotingError as exc:
                last_error = exc
                continue
            self._last_good = index
            return response
        raise ServiceNotAvailableError(f"no name server answered ({';'.join(self._addrs)}): {last_error}")

    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route over every broker; TopicNotExistError when the name server has none."""
        response = await self._invoke(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader.ext_fields(topic=topic)
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST or (
            response.code == ResponseCode.SUCCESS and not response.body
        ):
            raise TopicNotExistError(f"topic {topic!r} has no route on the name server")
        expect_success(response)
        return TopicRouteData.from_json(response.body)

    async def cluster_info(self) -> ClusterInfo:
        response = await self._invoke(RequestCode.GET_BROKER_CLUSTER_INFO)
        expect_success(response)
        return ClusterInfo.from_json(response.body)

    def __repr__(self) -> str:
        return f"<NamesrvClient {';'.join(self._addrs) or 'none'}>"
