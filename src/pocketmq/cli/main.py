"""Entry point of the ``pocketmq`` command.

Each sub-command lives in its own module exposing ``register(subparsers)``; that function adds the
sub-parser and sets ``func`` to a callable taking the parsed args and returning the exit status. Command ``X``
lives in ``pocketmq.cli.X_cmd``, and a command line that names one imports that module alone: ``pocketmq topic
list`` does not import the broker that ``serve`` needs (seconds of start-up on a busy machine). Help and unknown
commands import them all.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from pocketmq.cli.namesrv_check import explain_failure
from pocketmq.common.errors import PocketMQError

# module name -> sub-commands it registers
COMMAND_MODULES = (
    "pocketmq.cli.serve_cmd",  # serve
    "pocketmq.cli.namesrv_cmd",  # namesrv
    "pocketmq.cli.topic_cmd",  # topic create|update|delete|list|describe
    "pocketmq.cli.send_cmd",  # send
    "pocketmq.cli.message_cmd",  # message recall
    "pocketmq.cli.tail_cmd",  # tail
    "pocketmq.cli.cluster_cmd",  # cluster
    "pocketmq.cli.group_cmd",  # group
    "pocketmq.cli.dlq_cmd",  # dlq list|resend
    "pocketmq.cli.transaction_cmd",  # transaction list|resume
    "pocketmq.cli.retry_cmd",  # retry stats
    "pocketmq.cli.config_cmd",  # config set|get
    "pocketmq.cli.store_cmd",  # store verify
    "pocketmq.cli.tls_cmd",  # tls dev-cert
    "pocketmq.cli.acl_cmd",  # acl user|policy
)


def command_of(module: str) -> str:
    return module.rsplit(".", 1)[1].removesuffix("_cmd")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``command``'s alone when it is one."""
    parser = argparse.ArgumentParser(prog="pocketmq", description="PocketMQ: RocketMQ's messaging model in Python")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    only = [name for name in COMMAND_MODULES if command_of(name) == command]
    for name in only or COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # not written yet
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # A command reports its own outcome; the SDK's warnings (a malformed frame, a retry) would be stray lines.
    # The long-running commands configure logging, and their records still reach that handler.
    logging.getLogger("pocketmq").addHandler(logging.NullHandler())
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except (PocketMQError, OSError, ValueError) as exc:
        print(f"pocketmq {args.command}: error: {explain_failure(args, exc) or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
