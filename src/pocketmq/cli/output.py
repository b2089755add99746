"""What the client commands (topic, send, tail, cluster, group) share: the name server option, the client
configuration, and their output.

Output contract: tables for people (``format_table``: a header row, columns padded to their widest cell, cut to
fit a terminal), one
JSON object per line for scripts (``--json``, ``json_line``), flushed as each line is printed so that a script
reading a pipe sees a message as soon as it is acknowledged or received. Errors are one line on stderr and a
non-zero exit status (``pocketmq.cli.main``).

Messages as JSON: ``pocketmq.ops.message_json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence

from pocketmq.cli.terminal import paint
from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.config import NAMESPACE_ENV, NAMESRV_ENV, ClientConfig, default_namesrv_addr
from pocketmq.common.message import MessageExt
from pocketmq.ops.message_json import body_fields

# Short enough that an unreachable name server fails the command quickly, long enough for a busy broker.
CLI_CONNECT_TIMEOUT_S = 3.0
CLI_REQUEST_TIMEOUT_S = 5.0
TLS_ENV = "POCKETMQ_TLS"
CA_FILE_ENV = "POCKETMQ_CA_FILE"
# Access control's credentials of the client commands (docs/security.md).
ACCESS_KEY_ENV = "POCKETMQ_ACCESS_KEY"
SECRET_KEY_ENV = "POCKETMQ_SECRET_KEY"


def add_client_options(parser, *, json_output: bool = True) -> None:
    """``-n/--namesrv``, ``--namespace`` (and ``--json`` for commands with an output) on a client sub-command."""
    parser.add_argument(
        "-n",
        "--namesrv",
        default=None,
        metavar="HOST:PORT",
        help=f"name server address(es), ';'-separated (default: ${NAMESRV_ENV} or {default_namesrv_addr()})",
    )
    add_tls_options(parser)
    add_credential_options(parser)
    parser.add_argument(
        "--namespace",
        default=None,
        metavar="NS",
        help=f"the namespace of the topics and groups named (default: ${NAMESPACE_ENV}, else none)",
    )
    if json_output:
        parser.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")


def add_credential_options(parser) -> None:
    """``--access-key`` and ``--secret-key``: the user remoting requests are signed as (docs/security.md)."""
    parser.add_argument(
        "--access-key", default=None, help=f"sign every request as this user (default: ${ACCESS_KEY_ENV})"
    )
    parser.add_argument(
        "--secret-key",
        default=None,
        help=f"the user's secret (default: ${SECRET_KEY_ENV}; the environment keeps it out of the process list)",
    )


def credentials_of(args) -> tuple[str | None, str | None]:
    """The access key and secret key of ``add_credential_options``' flags, else of the environment."""
    return (
        args.access_key or os.environ.get(ACCESS_KEY_ENV) or None,
        args.secret_key or os.environ.get(SECRET_KEY_ENV) or None,
    )


def add_tls_options(parser) -> None:
    """``--tls``, ``--ca-file`` and the client certificate of mutual TLS (docs/security.md)."""
    parser.add_argument(
        "--tls",
        action="store_true",
        default=None,
        help=f"TLS to the name server and brokers (default: ${TLS_ENV} when set to 1)",
    )
    parser.add_argument(
        "--ca-file",
        default=None,
        help=f"verify the servers' certificates against this CA (implies --tls; default: ${CA_FILE_ENV})",
    )
    parser.add_argument("--tls-cert-file", default=None, help="this client's certificate, for mutual TLS")
    parser.add_argument("--tls-key-file", default=None, help="the key of --tls-cert-file")


def add_action(actions, name: str, help_text: str, func, *positionals: str):
    """A client sub-command action (``topic create`` ...) with its positionals, ``-n`` and ``--json``; the
    parser is returned for the action's own options."""
    parser = actions.add_parser(name, help=help_text)
    for positional in positionals:
        parser.add_argument(positional)
    add_client_options(parser)
    parser.set_defaults(func=func)
    return parser


def client_config(args) -> ClientConfig:
    """The SDK configuration of a CLI command: its name server and namespace, TLS, short timeouts, its own
    instance name."""
    ca_file = args.ca_file or os.environ.get(CA_FILE_ENV) or None
    tls = args.tls if args.tls is not None else os.environ.get(TLS_ENV) == "1"
    access_key, secret_key = credentials_of(args)
    return ClientConfig(
        namesrv_addr=args.namesrv or default_namesrv_addr(),
        namespace=args.namespace or os.environ.get(NAMESPACE_ENV, ""),
        instance_name=f"cli-{args.command}",
        connect_timeout_s=CLI_CONNECT_TIMEOUT_S,
        request_timeout_s=CLI_REQUEST_TIMEOUT_S,
        tls=tls or bool(ca_file) or bool(args.tls_cert_file),
        ca_file=ca_file,
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_key_file,
        access_key=access_key,
        secret_key=secret_key,
    )


def run_admin(args, action: Callable[[AsyncAdmin], Awaitable[int | None]]) -> int:
    """Run ``action(admin)`` with a started admin client of the command's name server; its exit status."""

    async def main() -> int | None:
        async with AsyncAdmin(client_config(args)) as admin:
            return await action(admin)

    return asyncio.run(main()) or 0


# A column is never cut below this many characters to fit a terminal
MIN_FITTED_COLUMN = 8


def format_table(rows: Sequence[dict], columns: Sequence[str], max_width: int | None = None) -> str:
    """``rows`` as a text table with ``columns`` as the header; a missing cell prints as ``-``. With
    ``max_width`` (a terminal's), the widest columns are cut, their long cells ending in ``~``, until the table
    fits or every column is down to MIN_FITTED_COLUMN; a pipe gets whole cells."""
    cells = [[str(c).upper() for c in columns]]
    cells += [["-" if row.get(c) is None else str(row[c]) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    while max_width is not None and sum(widths) + 2 * (len(widths) - 1) > max_width:
        widest = max(range(len(widths)), key=widths.__getitem__)
        if widths[widest] <= MIN_FITTED_COLUMN:
            break
        widths[widest] -= 1
    return "\n".join(
        "  ".join(_cut(cell, width).ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells
    )


def _cut(cell: str, width: int) -> str:
    return cell if len(cell) <= width else cell[: width - 1] + "~"


def json_line(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def emit(line: str) -> None:
    """Print one line now (scripts read our stdout as a stream)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def report(args, obj: dict, text: str) -> None:
    """The outcome of a command that changed something: ``obj`` as a JSON line with ``--json``, else ``text``."""
    emit(json_line(obj) if getattr(args, "json", False) else text)


def print_rows(args, rows: Sequence[dict], columns: Sequence[str]) -> None:
    """``rows`` as JSON lines with ``--json``, else as a table."""
    if getattr(args, "json", False):
        for row in rows:
            emit(json_line(row))
    else:
        max_width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        header, _, body = format_table(rows, columns, max_width).partition("\n")
        emit(paint(header, "bold", sys.stdout) + (f"\n{body}" if body else ""))


def message_to_text(msg: MessageExt, broker_name: str | None = None) -> str:
    """One line for people: where the message is, its tag and keys, and its body (escaped when binary)."""
    fields = body_fields(msg.body)
    body = fields["body"] if "body_encoding" not in fields else f"base64:{fields['body']}"
    meta = " ".join(f"{k}={v}" for k, v in (("tag", msg.tags), ("keys", ",".join(msg.keys) or None)) if v is not None)
    return f"{broker_name or '-'}/{msg.queue_id}@{msg.queue_offset} {msg.msg_id} {meta} {body!r}".replace("  ", " ")


def parse_key_values(items: Iterable[str], what: str) -> dict[str, str]:
    """``["k=v", ...]`` as a dict; ValueError naming ``what`` on an item without ``=`` or with an empty key."""
    result = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} {item!r}: expected KEY=VALUE")
        result[key] = value
    return result
