"""``pocketmq tls dev-cert DIR``: a development CA and a server certificate signed by it (SAN ``127.0.0.1`` and
``localhost``, plus ``--name``s), written to DIR as ``ca.pem``, ``ca-key.pem``, ``server.pem``, ``server-key.pem``
(keys readable by their owner only); it prints the flags that serve them and the environment the official gRPC
clients need to trust them (``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``). Also the TLS flags that ``serve`` and
``namesrv`` share (``add_server_tls_options``). docs/security.md.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

SERVER_TLS_FLAGS = ("tls_mode", "tls_cert_file", "tls_key_file", "tls_ca_file", "tls_client_auth", "tls_enable")


def register(subparsers) -> None:
    parser = subparsers.add_parser("tls", help="TLS helpers (development certificates)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    dev = actions.add_parser(
        "dev-cert",
        help="make a development CA and a server certificate for 127.0.0.1 and localhost",
        description=__doc__.split("\n\n")[0],
    )
    dev.add_argument("dir", help="directory to write the certificates and keys to (created if missing)")
    dev.add_argument(
        "--name",
        action="append",
        default=[],
        metavar="HOST_OR_IP",
        help="another name the server certificate covers (repeatable), e.g. the address brokers advertise",
    )
    dev.add_argument("--force", action="store_true", help="overwrite certificates already in DIR")
    dev.set_defaults(func=dev_cert)


def add_server_tls_options(parser) -> None:
    """The TLS flags of a server command; their values go to the config's ``tls_*`` fields (SERVER_TLS_FLAGS)."""
    parser.add_argument(
        "--tls-mode",
        choices=("disabled", "permissive", "enforcing"),
        help="permissive: TLS and plaintext on each port; enforcing: TLS only "
        "(default: permissive with --tls-cert-file, else disabled)",
    )
    parser.add_argument("--tls-cert-file", help="server certificate (PEM chain); reloaded when it changes")
    parser.add_argument("--tls-key-file", help="private key of --tls-cert-file (PEM)")
    parser.add_argument("--tls-ca-file", help="CA of client certificates, and of the servers this process calls")
    parser.add_argument(
        "--tls-client-auth", choices=("none", "optional", "require"), help="ask clients for a certificate"
    )
    parser.add_argument(
        "--tls-enable",
        action="store_true",
        default=None,
        help="connections this process opens (name servers, other brokers) use TLS (implied by enforcing)",
    )


def server_tls_overrides(args: argparse.Namespace) -> dict[str, object]:
    return {name: getattr(args, name) for name in SERVER_TLS_FLAGS if getattr(args, name) is not None}


def dev_cert(args: argparse.Namespace) -> int:
    # imported here: every ``pocketmq`` command registers this module, and ``cryptography`` is slow to import
    from pocketmq.runtime.certificates import DEFAULT_SERVER_NAMES, make_ca, make_server_certificate

    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {name: out / name for name in ("ca.pem", "ca-key.pem", "server.pem", "server-key.pem")}
    existing = [str(path) for path in files.values() if path.exists()]
    if existing and not args.force:
        raise ValueError(f"{', '.join(existing)} exist: use --force to replace them")
    names = tuple(dict.fromkeys((*DEFAULT_SERVER_NAMES, *args.name)))
    ca = make_ca()
    server = make_server_certificate(ca, names=names)
    _write(files["ca.pem"], ca.cert_pem, 0o644)
    _write(files["ca-key.pem"], ca.key_pem, 0o600)
    _write(files["server.pem"], server.cert_pem, 0o644)
    _write(files["server-key.pem"], server.key_pem, 0o600)
    ca_path, cert_path, key_path = (files[n].resolve() for n in ("ca.pem", "server.pem", "server-key.pem"))
    print(f"wrote a development CA and a server certificate for {', '.join(names)} to {out.resolve()}")
    print("serve with:")
    print(f"  pocketmq serve --tls-cert-file {cert_path} --tls-key-file {key_path}")
    print("official gRPC clients (Python, Node; tls_enable=True / sslEnabled: true) trust the CA with:")
    print(f"  export GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={ca_path}")
    print("PocketMQ SDK and CLI:")
    print(f"  ClientConfig(tls=True, ca_file='{ca_path}')    pocketmq ... --ca-file {ca_path}")
    return 0


def _write(path: Path, data: bytes, mode: int) -> None:
    """``data`` to ``path`` with ``mode`` from the start (a key is never readable by others, not even briefly)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
