"""A port a long-running command cannot listen on is one line naming the flag that sets it.

``listening(what, flag, host, port)`` wraps the start of one server: an ``OSError`` from asyncio's bind, or the
``RuntimeError`` gRPC raises for any failed bind (it says nothing about why), becomes a ``ConfigError`` like
``cannot listen on 127.0.0.1:8081 for gRPC: address already in use (choose another port with --port)``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections.abc import Iterator

from pocketmq.common.errors import ConfigError


@contextlib.contextmanager
def listening(what: str, flag: str, host: str, port: int) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise ConfigError(_cannot_listen(what, flag, host, port, exc.errno)) from None
    except RuntimeError as exc:
        if "bind" not in str(exc):
            raise
        raise ConfigError(_cannot_listen(what, flag, host, port, _bind_errno(host, port))) from None


def _cannot_listen(what: str, flag: str, host: str, port: int, code: int | None) -> str:
    reason = os.strerror(code).lower() if code else "the address cannot be bound"
    if code == errno.EADDRINUSE:
        hint = f"stop what listens there or choose another port with {flag}"
    elif code == errno.EADDRNOTAVAIL:
        hint = f"{host} is not an address of this machine (--host)"
    elif code == errno.EACCES:
        hint = f"ports below 1024 need privileges: choose another with {flag}"
    else:
        hint = f"check {flag} and --host"
    return f"cannot listen on {host}:{port} for {what}: {reason} ({hint})"


def _bind_errno(host: str, port: int) -> int | None:
    """Why ``host:port`` cannot be bound, found by binding it ourselves (gRPC's own error does not say)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC and asyncio bind
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.errno
    return None
