"""TLS's parts in one process: settings, certificates, the sniffing listener behind a remoting server, the SDK's
blocking channel over TLS, certificate reload."""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import threading

import pytest
from cryptography import x509

from pocketmq.client.blocking_channel import BlockingChannel
from pocketmq.common.errors import ConfigError, RemotingError
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.tls import ClientAuth, ServerTls, TlsMode, TlsOptions, TlsSettings, client_context
from pocketmq.protocol.transport import RemotingClient, RemotingServer, RequestRouter
from pocketmq.runtime.certificates import KeyAndCertificate, make_ca, make_server_certificate
from pocketmq.testing.polling import wait_until

pytestmark = pytest.mark.timeout(30)

ECHO = 4242


@pytest.fixture(scope="module")
def ca() -> KeyAndCertificate:
    return make_ca()


@pytest.fixture
def files(tmp_path, ca):
    """ca.pem, server.pem/server-key.pem and client.pem/client-key.pem, all of ``ca``."""
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem)
    for name in ("server", "client"):
        pair = make_server_certificate(ca, names=("localhost", "127.0.0.1") if name == "server" else ("client",))
        (tmp_path / f"{name}.pem").write_bytes(pair.cert_pem)
        (tmp_path / f"{name}-key.pem").write_bytes(pair.key_pem)
    return tmp_path


def router() -> RequestRouter:
    r = RequestRouter()
    r.register(ECHO, lambda conn, request: request.response(0, remark="echo", body=request.body))
    return r


def test_mode_defaults_to_permissive_with_a_certificate_and_disabled_without():
    assert TlsSettings.parse(mode=None).mode is TlsMode.DISABLED
    with_cert = TlsSettings.parse(mode=None, cert_file="c.pem", key_file="k.pem")
    assert with_cert.mode is TlsMode.PERMISSIVE and with_cert.serves_tls and not with_cert.opens_tls
    enforcing = TlsSettings.parse(mode="Enforcing")
    assert enforcing.opens_tls  # a broker that only speaks TLS talks TLS to its name servers too
    assert TlsSettings.parse(mode="disabled", outgoing=True).opens_tls


def test_settings_report_every_problem_at_once():
    with pytest.raises(ValueError) as caught:
        TlsSettings.parse(mode="strict", cert_file="c.pem", client_auth="require", reload_interval_ms=0)
    text = str(caught.value)
    for part in ("unknown TLS mode 'strict'", "go together", "needs tls_ca_file", "must be positive"):
        assert part in text
    with pytest.raises(ConfigError, match="needs tls_ca_file"):
        TlsOptions(tls_mode="enforcing", tls_client_auth="optional").tls_settings()
    assert (
        TlsOptions(tls_client_auth="OPTIONAL", tls_ca_file="ca.pem").tls_settings().client_auth is ClientAuth.OPTIONAL
    )


def test_server_certificate_names_ip_and_dns_and_chains_to_its_ca(ca):
    pair = make_server_certificate(ca, names=("localhost", "127.0.0.1", "10.1.2.3"))
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("10.1.2.3"),
    ]
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
    self_signed = x509.load_pem_x509_certificate(make_server_certificate(None).cert_pem)
    assert self_signed.issuer == self_signed.subject


async def start_server(tls: ServerTls | None) -> tuple[RemotingServer, str]:
    server = RemotingServer(router(), "127.0.0.1", 0, tls=tls)
    await server.start()
    return server, f"127.0.0.1:{server.port}"


async def echo(address: str, context: ssl.SSLContext | None) -> str:
    client = RemotingClient(ssl_context=context, connect_timeout_s=2)
    try:
        reply = await client.invoke(address, RemotingCommand.request(ECHO, body=b"x"), 2)
        return reply.remark
    finally:
        await client.close()


async def test_permissive_serves_tls_and_plaintext_on_one_port_enforcing_only_tls(files):
    for mode, plaintext_served in (("permissive", True), ("enforcing", False)):
        tls = ServerTls(
            TlsSettings.parse(mode=mode, cert_file=str(files / "server.pem"), key_file=str(files / "server-key.pem"))
        )
        server, address = await start_server(tls)
        try:
            assert await echo(address, client_context(str(files / "ca.pem"))) == "echo"  # verified: chain and IP SAN
            if plaintext_served:
                assert await echo(address, None) == "echo"
            else:
                with pytest.raises(RemotingError, match="closed"):
                    await echo(address, None)
            listener = server._tls_listener
            assert listener is not None and listener.tls_connections == 1
            assert listener.refused_connections == (0 if plaintext_served else 1)
        finally:
            await server.stop()


async def test_a_client_that_verifies_refuses_a_self_signed_server_and_one_that_does_not_accepts_it(files):
    server, address = await start_server(ServerTls(TlsSettings.parse(mode="permissive")))
    try:
        with pytest.raises(RemotingError):
            await echo(address, client_context(str(files / "ca.pem")))
        assert await echo(address, client_context()) == "echo"
    finally:
        await server.stop()


async def test_required_client_certificate(files):
    settings = TlsSettings.parse(
        mode="enforcing",
        cert_file=str(files / "server.pem"),
        key_file=str(files / "server-key.pem"),
        ca_file=str(files / "ca.pem"),
        client_auth="require",
    )
    server, address = await start_server(ServerTls(settings))
    try:
        with pytest.raises(RemotingError):
            await echo(address, client_context(str(files / "ca.pem")))
        with_cert = client_context(str(files / "ca.pem"), str(files / "client.pem"), str(files / "client-key.pem"))
        assert await echo(address, with_cert) == "echo"
        # a broker's outgoing connections present its own certificate
        assert await echo(address, settings.client_context()) == "echo"
    finally:
        await server.stop()


def test_reload_picks_up_changed_files_and_keeps_the_old_context_on_a_bad_one(files, ca):
    tls = ServerTls(
        TlsSettings.parse(
            mode="permissive", cert_file=str(files / "server.pem"), key_file=str(files / "server-key.pem")
        )
    )
    assert not tls.reload_if_changed()
    first = tls.remoting
    (files / "server.pem").write_bytes(b"not a certificate")
    with pytest.raises(ssl.SSLError):
        tls.reload_if_changed()
    assert tls.remoting is first
    renewed = make_server_certificate(ca)
    (files / "server-key.pem").write_bytes(renewed.key_pem)
    (files / "server.pem").write_bytes(renewed.cert_pem)
    assert tls.reload_if_changed() and tls.remoting is not first and tls.reloads == 1
    assert tls.grpc is not None


def test_blocking_channel_over_tls_sends_and_notices_a_closed_peer(files):
    """The synchronous producer's channel: a call over TLS, an idle channel kept, a closed one noticed."""
    loop = asyncio.new_event_loop()
    tls = ServerTls(
        TlsSettings.parse(mode="enforcing", cert_file=str(files / "server.pem"), key_file=str(files / "server-key.pem"))
    )
    server = RemotingServer(router(), "127.0.0.1", 0, tls=tls)
    loop.run_until_complete(server.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        channel = BlockingChannel(
            f"127.0.0.1:{server.port}", connect_timeout_s=2, ssl_context=client_context(str(files / "ca.pem"))
        )
        reply = channel.invoke(RemotingCommand.request(ECHO, body=b"y"), 2)
        assert (reply.remark, reply.body) == ("echo", b"y")
        assert not channel.peer_closed  # TLS 1.3 session tickets waiting are not a close
        assert channel.invoke(RemotingCommand.request(ECHO), 2).remark == "echo"
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(5)
        wait_until(lambda: channel.peer_closed, timeout_s=5)
        channel.close()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
