"""The TLS front tells the gRPC server behind it which client each call comes from (server/grpc_tls_front.py):
a grpc.aio server on the front's Unix socket sees a peer that ``client_peer`` turns into the client's address,
for as long as the client's connection lives."""

from __future__ import annotations

import grpc
import pytest

from pocketmq.protocol.tls import ServerTls, TlsSettings
from pocketmq.server.grpc_tls_front import GrpcTlsFront
from pocketmq.testing.polling import eventually

pytestmark = pytest.mark.timeout(30)


async def test_the_server_behind_the_front_learns_each_client_address():
    front = GrpcTlsFront(ServerTls(TlsSettings.parse(mode="permissive")), "127.0.0.1", 0, peer_retention_s=0.5)
    seen: list[str] = []

    def who_am_i(request: bytes, context) -> bytes:
        seen.append(context.peer())
        return front.client_peer(context.peer()).encode()

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(who_am_i)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.Peer", {"Who": handler}),))
    server.add_insecure_port(front.internal_address)
    await server.start()
    port = await front.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            first = await channel.unary_unary("/t.Peer/Who")(b"")
            again = await channel.unary_unary("/t.Peer/Who")(b"")
        assert first == again and first.startswith(b"ipv4:127.0.0.1:") and first != b"ipv4:127.0.0.1:0"
        assert seen[0].startswith("unix:") and seen[0] != front.internal_address
        assert front.client_peer("ipv4:10.1.2.3:4") == "ipv4:10.1.2.3:4"  # not through the front: itself
        # known a while after the client left (a call it sent may not have asked yet), then forgotten
        assert front.client_peer(seen[0]) == first.decode()
        await eventually(lambda: front.client_peer(seen[0]) == seen[0], 5, "the closed client's peer forgotten")
    finally:
        await front.stop()
        await server.stop(0)
