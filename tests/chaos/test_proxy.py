"""The chaos proxy names the process that connected and stalls or delays exactly the links it is told to."""

from __future__ import annotations

import os
import socket
import socketserver
import threading
import time

import pytest

from pocketmq.runtime.ports import free_port
from pocketmq.testing.chaos.peers import PeerNames
from pocketmq.testing.chaos.proxy import ChaosProxy

PROXY_HOST = "127.57.0.10"


class _Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def proxied_echo():
    port = free_port(PROXY_HOST)
    server = socketserver.ThreadingTCPServer(("127.0.0.1", port), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    peers = PeerNames()
    peers.set("me", os.getpid())
    proxy = ChaosProxy(peers)
    proxy.start()
    proxy.listen("echo", PROXY_HOST, port)
    try:
        yield proxy, port
    finally:
        proxy.close()
        server.shutdown()
        server.server_close()


def _echo_once(sock: socket.socket, payload: bytes, timeout_s: float) -> bytes | None:
    sock.settimeout(timeout_s)
    sock.sendall(payload)
    try:
        return sock.recv(4096)
    except TimeoutError:
        return None


@pytest.mark.timeout(30)
def test_a_partition_stalls_the_link_until_healed_and_a_delay_holds_each_chunk(proxied_echo):
    proxy, port = proxied_echo
    with socket.create_connection((PROXY_HOST, port)) as sock:
        assert _echo_once(sock, b"one", 5) == b"one"
        assert proxy.accepted == {("me", "echo"): 1}  # the caller named by its pid, not its address
        proxy.partition("echo", "me")
        assert _echo_once(sock, b"two", 0.5) is None  # stalled, not closed
        proxy.heal_partition("me", "echo")
        sock.settimeout(5)
        assert sock.recv(4096) == b"two"  # TCP carries on after the heal
        proxy.delay("me", "echo", 300)
        started = time.monotonic()
        assert _echo_once(sock, b"three", 5) == b"three"
        assert time.monotonic() - started >= 0.55  # held both ways
        proxy.heal_all()
        started = time.monotonic()
        assert _echo_once(sock, b"four", 5) == b"four"
        assert time.monotonic() - started < 0.3


@pytest.mark.timeout(30)
def test_a_link_to_another_process_is_not_touched(proxied_echo):
    proxy, port = proxied_echo
    proxy.partition("someone-else", "echo")
    with socket.create_connection((PROXY_HOST, port)) as sock:
        assert _echo_once(sock, b"hello", 5) == b"hello"
