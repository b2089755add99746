"""When a client command fails at its name server, say what ``-n`` points at if it is not one.

A broker's remoting port answers a name server request with REQUEST_CODE_NOT_SUPPORTED, a gRPC port drops
the connection, an HTTP server answers text that reads as a huge frame: none of it tells a user that ``-n``
is wrong, nor does a refused connection say how to get a name server. ``explain_failure(args, exc)`` asks each
address after a failure (never before: a working command pays nothing) and returns a sentence such as
``127.0.0.1:10911 is a broker's remoting port, not a name server; its name server is 127.0.0.1:9876 (-n
127.0.0.1:9876)`` or ``nothing listens on ...: start a broker ...``, or ``None`` when every address may be a
name server, or is silent. A command that could connect to none of its name servers in time is not probed (a
probe would only wait for them again); the probes run at once, each in two PROBE_TIMEOUT_S at most.
"""

from __future__ import annotations

import asyncio

from pocketmq.client.config import NAMESRV_ENV, default_namesrv_addr
from pocketmq.common.errors import ConnectTimeoutError, PocketMQError, RemotingError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.properties_text import parse_properties_text
from pocketmq.protocol.transport import RemotingClient

PROBE_TIMEOUT_S = 1.0
# The client half of an HTTP/2 connection preface and an empty SETTINGS frame: an HTTP/2 (gRPC) server
# answers with a SETTINGS frame of its own, an HTTP/1 server with a status line.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_HTTP2_SETTINGS_TYPE = 4
_HTTP2_FRAME_HEADER_BYTES = 9


def explain_failure(args, exc: BaseException) -> str | None:
    """For a client command (it has ``-n``) that failed talking to its name server: what the address is."""
    if not hasattr(args, "namesrv") or not _namesrv_failure(exc):
        return None
    addrs = [a.strip() for a in (args.namesrv or default_namesrv_addr()).split(";") if a.strip()]
    findings = asyncio.run(_probe_all(addrs))
    return "; ".join(f for f in findings if f) or None


def _namesrv_failure(exc: BaseException) -> bool:
    """A failure a probe may explain: not one where no address could be connected to in time, which a probe
    could only wait for again, past the connect timeout the command's failure already took."""
    if isinstance(exc, RemoteServerError):
        return exc.response_code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    return isinstance(exc, RemotingError) and not isinstance(exc, ConnectTimeoutError) and "name server" in str(exc)


async def _probe_all(addrs: list[str]) -> list[str | None]:
    return list(await asyncio.gather(*(what_is_at(addr) for addr in addrs)))


async def what_is_at(addr: str) -> str | None:
    """Why ``addr`` is not a name server (nothing listens there, or another server does), ``None`` when it
    may be one, or does not answer."""
    client = RemotingClient(connect_timeout_s=PROBE_TIMEOUT_S)
    try:
        reply = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), PROBE_TIMEOUT_S)
    except RemotingError:
        reply = None
    except PocketMQError:
        return None
    finally:
        await client.close()
    if reply is not None:
        if reply.code != ResponseCode.SUCCESS:
            return None  # a remoting server that is not a broker: a name server, or something we cannot name
        namesrv = parse_properties_text(reply.body or b"").get("namesrv_addr")
        where = f"; its name server is {namesrv} (-n {namesrv})" if namesrv else ""
        return f"{addr} is a broker's remoting port, not a name server{where}"
    return await _http_kind(addr)


async def _http_kind(addr: str) -> str | None:
    host, _, port = addr.rpartition(":")
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), PROBE_TIMEOUT_S)
    except ConnectionRefusedError:
        return (
            f"nothing listens on {addr}: start a broker (`pocketmq serve` runs one with its name server) "
            f"or give the name server's address with -n HOST:PORT or ${NAMESRV_ENV}"
        )
    except (OSError, ValueError, TimeoutError):
        return None
    try:
        writer.write(_HTTP2_PREFACE)
        head = await asyncio.wait_for(reader.read(_HTTP2_FRAME_HEADER_BYTES), PROBE_TIMEOUT_S)
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
    if head.startswith(b"HTTP/"):
        return f"{addr} is an HTTP server (a broker's /metrics port?), not a name server"
    if len(head) == _HTTP2_FRAME_HEADER_BYTES and head[3] == _HTTP2_SETTINGS_TYPE:
        return f"{addr} speaks HTTP/2 (a broker's gRPC port?), not a name server (remoting, port 9876 by default)"
    return None
