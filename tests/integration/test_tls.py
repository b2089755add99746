"""TLS against real ``pocketmq serve`` processes (docs/security.md).

- permissive (the default with a certificate): the official Python client with ``tls_enable=True`` and the dev
  CA, and one without TLS, send and receive on the same gRPC port; the SDK sends over TLS and in plaintext on
  the same remoting port and reads everything back over TLS; the CLI sends with ``--ca-file``.
- enforcing with no certificate files (a self-signed certificate for the run): a plaintext client is refused at
  once on the remoting, name-server and gRPC ports (its connection closed, no hang); a TLS client that verifies
  nothing works, the broker having registered with its embedded name server over TLS.
- mutual TLS (``--tls-client-auth require``): a client without a certificate is refused, one with a certificate
  of the CA works.
- a replaced certificate is served to new connections without a restart.
- a SYNC master and its slave, both enforcing: registration and replication run over TLS.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pocketmq.cli.main import main as cli_main
from pocketmq.client import ClientConfig, Message, Producer, PullConsumer, PullStatus, SendStatus
from pocketmq.common.errors import PocketMQError
from pocketmq.protocol.tls import client_context
from pocketmq.protocol.transport import RemotingClient
from pocketmq.runtime.certificates import KeyAndCertificate, make_ca, make_server_certificate
from pocketmq.testing.polling import eventually, wait_until
from pocketmq.testing.processes import broker_process

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

DRIVER = Path(__file__).with_name("tls_official_client.py")


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    """``pocketmq tls dev-cert`` output: ca.pem, ca-key.pem, server.pem, server-key.pem."""
    out = tmp_path_factory.mktemp("certs")
    assert cli_main(["tls", "dev-cert", str(out)]) == 0
    return out


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def send_and_read(config: ClientConfig, topic: str, bodies: list[str]) -> list[str]:
    """Send ``bodies`` with a synchronous producer of ``config``; every body of ``topic`` read back with it."""
    with Producer(config) as producer:
        for body in bodies:
            assert producer.send(Message.create(topic, body)).status is SendStatus.SEND_OK
    return read_topic(config, topic)


def read_topic(config: ClientConfig, topic: str) -> list[str]:
    got = []
    with PullConsumer(f"read-{topic}", config) as consumer:
        for queue in consumer.fetch_queues(topic):
            offset, end = 0, consumer.max_offset(queue)
            while offset < end:
                result = consumer.pull(queue, offset, 64)
                assert result.status is PullStatus.FOUND, result
                got += [m.body.decode() for m in result.messages]
                offset = result.next_begin_offset
    return sorted(got)


def official_client(tmp_path: Path, endpoint: str, topic: str, *, tls: bool, ca_file: Path) -> subprocess.Popen:
    spec = {"endpoint": endpoint, "topic": topic, "group": f"g-{topic}", "count": 10, "tls": tls, "deadline_s": 30}
    home = tmp_path / topic
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(ca_file)}
    return subprocess.Popen(
        [sys.executable, str(DRIVER), json.dumps(spec)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def closed_without_answer(address: str, payload: bytes) -> float:
    """Seconds until the server closed a plaintext connection that sent ``payload``; fails on any answer."""
    started = time.monotonic()
    with socket.create_connection(host_port(address), timeout=5) as sock:
        sock.sendall(payload)
        try:
            assert sock.recv(1024) == b""
        except ConnectionResetError:
            pass
    return time.monotonic() - started


def served_certificate(address: str) -> bytes:
    """The DER certificate a TLS handshake with ``address`` presents."""
    context = client_context()
    with socket.create_connection(host_port(address), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def test_permissive_port_serves_official_clients_and_the_sdk_with_and_without_tls(certs, tmp_path, capsys):
    broker = broker_process(
        tmp_path / "b",
        extra_args=["--tls-cert-file", str(certs / "server.pem"), "--tls-key-file", str(certs / "server-key.pem")],
    ).start()
    try:
        clients = {
            tls: official_client(tmp_path, broker.grpc, f"official_{tls}", tls=tls, ca_file=certs / "ca.pem")
            for tls in (True, False)
        }
        for tls, proc in clients.items():
            out, err = proc.communicate(timeout=90)
            assert proc.returncode == 0, (out, err[-2000:])
            outcome = json.loads(out.splitlines()[-1])
            assert len(outcome["sent"]) == 10 and sorted(outcome["received"]) == sorted(outcome["sent"]), tls

        tls_config = ClientConfig(namesrv_addr=broker.namesrv, tls=True, ca_file=str(certs / "ca.pem"))
        plain_config = ClientConfig(namesrv_addr=broker.namesrv)
        send_and_read(plain_config, "sdk_mixed", [f"plain-{i}" for i in range(20)])
        got = send_and_read(tls_config, "sdk_mixed", [f"tls-{i}" for i in range(20)])
        assert got == sorted([f"plain-{i}" for i in range(20)] + [f"tls-{i}" for i in range(20)])

        capsys.readouterr()
        ca = str(certs / "ca.pem")
        assert cli_main(["send", "-n", broker.namesrv, "--ca-file", ca, "--body", "from-cli", "cli_tls"]) == 0
        assert "SEND_OK" in capsys.readouterr().out
        assert read_topic(tls_config, "cli_tls") == ["from-cli"]
    finally:
        assert broker.stop() == 0, broker.log_tail()


def test_enforcing_closes_plaintext_connections_at_once_and_serves_tls(tmp_path):
    broker = broker_process(tmp_path / "b", extra_args=["--tls-mode", "enforcing"]).start()
    try:
        assert "event=tls_self_signed" in broker.log_tail(200)
        frame = b"\x00\x00\x00\x10" + b"\x00" * 16  # the start of a remoting frame
        preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # what a plaintext gRPC client sends first
        for address, payload in ((broker.remoting, frame), (broker.namesrv, frame), (broker.grpc, preface)):
            assert closed_without_answer(address, payload) < 2.0, address

        started = time.monotonic()
        with pytest.raises(PocketMQError), Producer(ClientConfig(namesrv_addr=broker.namesrv)) as producer:
            producer.send(Message.create("enforced", "plain"))
        assert time.monotonic() - started < 5.0  # a clear failure, not a wait for timeouts

        any_cert = ClientConfig(namesrv_addr=broker.namesrv, tls=True)  # the self-signed certificate passes
        assert send_and_read(any_cert, "enforced", ["over-tls"]) == ["over-tls"]
    finally:
        assert broker.stop() == 0, broker.log_tail()


def write_pair(directory: Path, prefix: str, pair: KeyAndCertificate) -> tuple[Path, Path]:
    cert, key = directory / f"{prefix}.pem", directory / f"{prefix}-key.pem"
    cert.write_bytes(pair.cert_pem)
    key.write_bytes(pair.key_pem)
    return cert, key


def test_mutual_tls_refuses_a_client_without_a_certificate(certs, tmp_path):
    ca = KeyAndCertificate((certs / "ca-key.pem").read_bytes(), (certs / "ca.pem").read_bytes())
    client_cert, client_key = write_pair(tmp_path, "client", make_server_certificate(ca, names=("client",)))
    broker = broker_process(
        tmp_path / "b",
        extra_args=[
            *("--tls-mode", "enforcing", "--tls-client-auth", "require", "--tls-ca-file", str(certs / "ca.pem")),
            *("--tls-cert-file", str(certs / "server.pem"), "--tls-key-file", str(certs / "server-key.pem")),
        ],
    ).start()
    try:
        without = ClientConfig(namesrv_addr=broker.namesrv, tls=True, ca_file=str(certs / "ca.pem"))
        with pytest.raises(PocketMQError), Producer(without) as producer:
            producer.send(Message.create("mtls", "refused"))
        assert "event=tls_handshake_failed" in broker.log_tail(200)

        with_cert = ClientConfig(
            namesrv_addr=broker.namesrv,
            tls=True,
            ca_file=str(certs / "ca.pem"),
            tls_cert_file=str(client_cert),
            tls_key_file=str(client_key),
        )
        # the route comes from the embedded name server, which the broker reached with its own certificate
        assert send_and_read(with_cert, "mtls", ["with-cert"]) == ["with-cert"]
    finally:
        assert broker.stop() == 0, broker.log_tail()


def test_a_replaced_certificate_is_served_without_a_restart(certs, tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    cert, key = write_pair(
        live, "server", KeyAndCertificate((certs / "server-key.pem").read_bytes(), (certs / "server.pem").read_bytes())
    )
    broker = broker_process(
        tmp_path / "b",
        extra_args=["--tls-cert-file", str(cert), "--tls-key-file", str(key), "--set", "tls_reload_interval_ms=100"],
    ).start()
    try:
        before = served_certificate(broker.remoting)
        assert ssl.DER_cert_to_PEM_cert(before).encode().strip() == (certs / "server.pem").read_bytes().strip()
        renewed = make_server_certificate(make_ca("renewal CA"))
        staged = write_pair(tmp_path, "staged", renewed)
        os.replace(staged[1], key)  # key first: a round between the two writes fails to load and keeps the old pair
        os.replace(staged[0], cert)
        wanted = renewed.cert_pem.strip()
        for address in (broker.remoting, broker.grpc, broker.namesrv):
            wait_until(
                lambda a=address: ssl.DER_cert_to_PEM_cert(served_certificate(a)).encode().strip() == wanted,
                timeout_s=10,
                message=f"{address} still serves the old certificate",
            )
        assert "event=tls_reloaded" in broker.log_tail(200)
    finally:
        assert broker.stop() == 0, broker.log_tail()


async def test_replication_and_registration_run_over_tls_between_enforcing_members(tmp_path):
    """A SYNC master (with its embedded name server) and its slave, both TLS only: the slave registers, follows
    and acknowledges SYNC sends, so every connection between them spoke TLS (a plaintext one is closed)."""
    from test_ha_replication import _has_all, _sent_ok
    from test_ha_replication import broker as ha_broker

    master = ha_broker(tmp_path, "", "master", 0, "sync_master")
    master.args += ["--tls-mode", "enforcing"]
    master.start()
    slave = ha_broker(tmp_path, master.namesrv, "slave", 1, "slave")
    slave.args += ["--tls-mode", "enforcing"]
    client = RemotingClient(ssl_context=client_context())
    try:
        slave.start()
        await eventually(lambda: _sent_ok(client, master.remoting, b"probe"), 20, "a SYNC send acknowledged")
        assert await eventually(lambda: _has_all(client, slave.remoting, [b"probe"]), 10, "the slave has it")
    finally:
        await client.close()
        for member in (slave, master):
            assert member.stop() == 0, member.log_tail()
