"""TLS settings and SSL contexts, for the ports a process serves and the connections it opens (docs/security.md).

A server port runs in one of RocketMQ's modes (``TlsMode``): ``disabled`` serves plaintext only, ``permissive``
serves TLS and plaintext on the same port (the first byte of a connection tells: ``0x16`` opens a TLS
handshake, anything else is a remoting frame or an HTTP/2 preface), ``enforcing`` serves TLS only. Its
certificate comes from PEM files, reloaded when they change (``ServerTls.reload_if_changed``, run by a periodic
task); without files it is a self-signed certificate made at each start, which the clients that check nothing
(RocketMQ's Java clients in their default test mode) accept. ``client_auth`` asks clients for a certificate
signed by ``ca_file`` (mutual TLS): ``require`` refuses a handshake without one.

Connections a client opens (``client_context``) verify the server against ``ca_file`` (chain and host name) when
one is given, else accept any certificate, as RocketMQ's clients do in test mode.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import socket
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.common.errors import ConfigError
from pocketmq.runtime.periodic import PeriodicTask

log = logging.getLogger(__name__)

TLS_HANDSHAKE_RECORD = 0x16  # first byte of a TLS ClientHello (content type "handshake")
DEFAULT_RELOAD_INTERVAL_MS = 10_000
GRPC_ALPN = ("h2",)


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.Enum):
    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


def _choice(enum_type: type[enum.Enum], text: str, what: str):
    try:
        return enum_type(text.strip().lower())
    except ValueError:
        raise ValueError(f"unknown {what} {text!r} ({_choices(enum_type)})") from None


@dataclass(frozen=True)
class TlsSettings:
    """What one process does with TLS: on its ports (``mode`` and the certificate) and on the connections it opens
    to others (``outgoing``)."""

    mode: TlsMode = TlsMode.DISABLED
    cert_file: str | None = None
    key_file: str | None = None
    ca_file: str | None = None
    client_auth: ClientAuth = ClientAuth.NONE
    reload_interval_ms: int = DEFAULT_RELOAD_INTERVAL_MS
    outgoing: bool = False

    @classmethod
    def parse(
        cls,
        *,
        mode: str | None,
        cert_file: str | None = None,
        key_file: str | None = None,
        ca_file: str | None = None,
        client_auth: str = "none",
        reload_interval_ms: int = DEFAULT_RELOAD_INTERVAL_MS,
        outgoing: bool = False,
    ) -> TlsSettings:
        """From config text; ``mode`` None means permissive when a certificate file is given, else disabled.
        ValueError naming every problem."""
        problems = []
        tls_mode = TlsMode.PERMISSIVE if mode is None and cert_file else TlsMode.DISABLED
        auth = ClientAuth.NONE
        try:
            tls_mode = _choice(TlsMode, mode, "TLS mode") if mode is not None else tls_mode
        except ValueError as exc:
            problems.append(str(exc))
        try:
            auth = _choice(ClientAuth, client_auth, "TLS client auth")
        except ValueError as exc:
            problems.append(str(exc))
        if bool(cert_file) != bool(key_file):
            problems.append("tls_cert_file and tls_key_file go together")
        if auth is not ClientAuth.NONE and not ca_file:
            problems.append(f"tls_client_auth {auth.value} needs tls_ca_file (the CA that signs client certificates)")
        if reload_interval_ms <= 0:
            problems.append("tls_reload_interval_ms must be positive")
        if problems:
            raise ValueError("; ".join(problems))
        return cls(tls_mode, cert_file or None, key_file or None, ca_file or None, auth, reload_interval_ms, outgoing)

    @property
    def serves_tls(self) -> bool:
        return self.mode is not TlsMode.DISABLED

    @property
    def opens_tls(self) -> bool:
        """Connections this process opens use TLS: asked for, or implied by a port that speaks nothing else (as a
        RocketMQ broker in enforcing mode talks TLS to its name servers)."""
        return self.outgoing or self.mode is TlsMode.ENFORCING

    def client_context(self) -> ssl.SSLContext | None:
        """The context for connections this process opens (its own certificate presented when it has one, for
        peers that require client certificates), or None when they are plaintext."""
        if not self.opens_tls:
            return None
        return client_context(self.ca_file, self.cert_file, self.key_file)


def client_context(
    ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None
) -> ssl.SSLContext:
    """A client's context: verifies the server's chain and host name against ``ca_file``, or nothing without one;
    presents ``cert_file`` when given (mutual TLS)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    return context


def _mode_check(value: str | None) -> str | None:
    return None if value is None or value.strip().lower() in {m.value for m in TlsMode} else _choices(TlsMode)


def _client_auth_check(value: str) -> str | None:
    return None if value.strip().lower() in {a.value for a in ClientAuth} else _choices(ClientAuth)


def _choices(enum_type: type[enum.Enum]) -> str:
    return "must be one of " + "|".join(str(member.value) for member in enum_type)


@dataclass(frozen=True)
class TlsOptions:
    """The TLS settings of a server process's config (the broker's and the name server's inherit them), with
    RocketMQ's property names as aliases."""

    # disabled | permissive | enforcing; unset: permissive when tls_cert_file is given, else disabled
    tls_mode: str | None = field(default=None, metadata={"aliases": ("tls.server.mode",), "check": _mode_check})
    tls_cert_file: str | None = field(default=None, metadata={"aliases": ("tls.server.certPath",)})
    tls_key_file: str | None = field(default=None, metadata={"aliases": ("tls.server.keyPath",)})
    # the CA that signs client certificates (tls_client_auth) and, for connections this process opens, servers'
    tls_ca_file: str | None = field(default=None, metadata={"aliases": ("tls.server.trustCertPath",)})
    tls_client_auth: str = field(
        default="none", metadata={"aliases": ("tls.server.need.client.auth",), "check": _client_auth_check}
    )
    # how often the certificate files are looked at for changes
    tls_reload_interval_ms: int = DEFAULT_RELOAD_INTERVAL_MS
    # connections this process opens (to name servers, other brokers) use TLS; implied by tls_mode enforcing
    tls_enable: bool = field(default=False, metadata={"aliases": ("tls.enable",)})

    def tls_settings(self) -> TlsSettings:
        """These options checked together; ConfigError naming every problem."""
        try:
            return TlsSettings.parse(
                mode=self.tls_mode,
                cert_file=self.tls_cert_file,
                key_file=self.tls_key_file,
                ca_file=self.tls_ca_file,
                client_auth=self.tls_client_auth,
                reload_interval_ms=self.tls_reload_interval_ms,
                outgoing=self.tls_enable,
            )
        except ValueError as exc:
            raise ConfigError(f"invalid TLS configuration: {exc}") from None


class ServerTls:
    """The server contexts of one process (plain for remoting, ALPN ``h2`` for gRPC), rebuilt when the certificate
    files change. Connections already open keep the context they started with."""

    def __init__(self, settings: TlsSettings):
        self.settings = settings
        self._stamps = self._file_stamps()
        self._self_signed: tuple[bytes, bytes] | None = None
        if settings.cert_file is None:
            # imported here: ``cryptography`` takes ~0.2 s to import, which every process that loads the transport
            # (each SDK client) would pay otherwise
            from pocketmq.runtime.certificates import make_server_certificate

            made = make_server_certificate(None, names=_self_signed_names())
            self._self_signed = (made.cert_pem, made.key_pem)
            log.warning(
                "event=tls_self_signed reason=no tls_cert_file detail=a certificate made for this run only; "
                "clients that verify the server will refuse it"
            )
        self.remoting, self.grpc = self._build()
        self.reloads = 0
        self._reloader: PeriodicTask | None = None

    def start_reloading(self, metrics=None) -> None:
        """Look at the certificate files every ``reload_interval_ms`` (a periodic task, ``tls-reload``)."""
        if self.settings.cert_file is None or self._reloader is not None:
            return
        self._reloader = PeriodicTask(
            "tls-reload", self.reload_if_changed, self.settings.reload_interval_ms, metrics=metrics
        )
        self._reloader.start()

    async def stop_reloading(self) -> None:
        if self._reloader is not None:
            await self._reloader.stop()
            self._reloader = None

    @property
    def mode(self) -> TlsMode:
        return self.settings.mode

    def reload_if_changed(self) -> bool:
        """Rebuild the contexts when a certificate, key or CA file changed since the last build; True when they were
        rebuilt. A file that cannot be loaded (half written) raises and the old contexts stay: the next round tries
        again."""
        stamps = self._file_stamps()
        if stamps == self._stamps:
            return False
        self.remoting, self.grpc = self._build()
        self._stamps = stamps
        self.reloads += 1
        log.info("event=tls_reloaded cert_file=%s reloads=%d", self.settings.cert_file, self.reloads)
        return True

    def _file_stamps(self) -> tuple[object, ...]:
        paths = (self.settings.cert_file, self.settings.key_file, self.settings.ca_file)
        stamps: list[object] = []
        for path in paths:
            if path is None:
                stamps.append(None)
                continue
            try:
                stat = os.stat(path)
                stamps.append((stat.st_mtime_ns, stat.st_size, stat.st_ino))
            except OSError:
                stamps.append("missing")
        return tuple(stamps)

    def _build(self) -> tuple[ssl.SSLContext, ssl.SSLContext]:
        with self._key_material() as (cert_file, key_file):
            return self._context(cert_file, key_file, ()), self._context(cert_file, key_file, GRPC_ALPN)

    def _context(self, cert_file: str, key_file: str, alpn: tuple[str, ...]) -> ssl.SSLContext:
        settings = self.settings
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert_file, key_file)
        if settings.client_auth is not ClientAuth.NONE:
            context.load_verify_locations(cafile=settings.ca_file)
            context.verify_mode = ssl.CERT_REQUIRED if settings.client_auth is ClientAuth.REQUIRE else ssl.CERT_OPTIONAL
        if alpn:
            context.set_alpn_protocols(list(alpn))
        return context

    @contextlib.contextmanager
    def _key_material(self) -> Iterator[tuple[str, str]]:
        """The certificate and key as files (ssl loads nothing else): the configured ones, or the self-signed pair
        written to a private temporary directory for as long as the load takes."""
        if self._self_signed is None:
            yield self.settings.cert_file, self.settings.key_file  # type: ignore[misc]
            return
        with tempfile.TemporaryDirectory(prefix="pocketmq-tls-") as tmp:
            cert_file, key_file = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
            cert_file.write_bytes(self._self_signed[0])
            key_file.touch(mode=0o600)
            key_file.write_bytes(self._self_signed[1])
            yield str(cert_file), str(key_file)

    def __repr__(self) -> str:
        source = self.settings.cert_file or "self-signed"
        return f"<ServerTls {self.mode.value} {source} client_auth={self.settings.client_auth.value}>"


def _self_signed_names() -> tuple[str, ...]:
    """localhost, 127.0.0.1 and this host's name: what a local client may dial."""
    hostname = socket.gethostname()
    return ("localhost", "127.0.0.1", hostname) if hostname and hostname != "localhost" else ("localhost", "127.0.0.1")
