"""TLS at the gRPC proxy (docs/grpc.md, "Proxy"; docs/security.md, "TLS"): a broker (with its embedded name
server) that speaks TLS only, and ``pocketmq proxy --workers 2 --tls-mode enforcing`` with a certificate: the
unmodified official client sends and receives over TLS through the proxy, which reaches the name server and the
broker over TLS (they close plaintext connections); a plaintext gRPC connection to the proxy is closed at once."""

from __future__ import annotations

import json

import pytest
from tests.integration.test_tls import certs, closed_without_answer, official_client  # noqa: F401 (certs: fixture)

from pocketmq.testing.processes import broker_process, proxy_process

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, certs):
    workdir = tmp_path_factory.mktemp("proxy-tls")
    server_files = ("--tls-cert-file", str(certs / "server.pem"), "--tls-key-file", str(certs / "server-key.pem"))
    broker = broker_process(
        workdir / "broker", "broker-pxtls", extra_args=["--tls-mode", "enforcing", *server_files]
    ).start()
    proxy = proxy_process(
        workdir / "proxy",
        broker.namesrv,
        workers=2,
        extra_args=["--tls-mode", "enforcing", *server_files, "--tls-ca-file", str(certs / "ca.pem")],
    ).start(timeout_s=90)
    yield {"broker": broker, "proxy": proxy}
    try:
        assert proxy.stop() == 0, proxy.log_tail()
    finally:
        assert broker.stop() == 0, broker.log_tail()


def test_the_official_client_sends_and_receives_over_tls_through_the_proxy(cluster, certs, tmp_path):
    client = official_client(tmp_path, cluster["proxy"].grpc, "px_tls", tls=True, ca_file=certs / "ca.pem")
    out, err = client.communicate(timeout=90)
    assert client.returncode == 0, (out, err[-2000:])
    outcome = json.loads(out.splitlines()[-1])
    assert len(outcome["sent"]) == 10 and sorted(outcome["received"]) == sorted(outcome["sent"]), outcome


def test_a_plaintext_connection_to_an_enforcing_proxy_is_closed_at_once(cluster):
    assert closed_without_answer(cluster["proxy"].grpc, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") < 5
