"""Entry point of the ``pocketmq`` command.

Each sub-command lives in its own module exposing ``register(subparsers)``; that function adds the
sub-parser and sets ``func`` to a callable taking the parsed args and returning the exit status. Command ``X``
lives in ``pocketmq.cli.X_cmd``, and a command line that names one imports that module alone: ``pocketmq topic
list`` does not import the broker that ``serve`` needs (seconds of start-up on a busy machine). Help and unknown
commands import them all, ``--version`` none.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys

import pocketmq
from pocketmq.cli import parsing
from pocketmq.cli.namesrv_check import explain_failure
from pocketmq.cli.terminal import print_error
from pocketmq.common.errors import PocketMQError

# module name -> sub-commands it registers
COMMAND_MODULES = (
    "pocketmq.cli.serve_cmd",  # serve
    "pocketmq.cli.namesrv_cmd",  # namesrv
    "pocketmq.cli.proxy_cmd",  # proxy
    "pocketmq.cli.console_cmd",  # console
    "pocketmq.cli.topic_cmd",  # topic create|update|delete|list|describe|route
    "pocketmq.cli.send_cmd",  # send
    "pocketmq.cli.message_cmd",  # message query|show|consume-directly|recall
    "pocketmq.cli.tail_cmd",  # tail
    "pocketmq.cli.cluster_cmd",  # cluster
    "pocketmq.cli.broker_cmd",  # broker status
    "pocketmq.cli.group_cmd",  # group create|list|describe|consumers|reset-offset
    "pocketmq.cli.dlq_cmd",  # dlq list|resend
    "pocketmq.cli.transaction_cmd",  # transaction list|resume
    "pocketmq.cli.retry_cmd",  # retry stats
    "pocketmq.cli.config_cmd",  # config set|get
    "pocketmq.cli.store_cmd",  # store verify
    "pocketmq.cli.tls_cmd",  # tls dev-cert
    "pocketmq.cli.acl_cmd",  # acl user|policy
    "pocketmq.cli.completion_cmd",  # completion bash|zsh|fish
)


def command_of(module: str) -> str:
    return module.rsplit(".", 1)[1].removesuffix("_cmd")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``command``'s alone when it is one."""
    parser = parsing.CommandParser(prog="pocketmq", description="PocketMQ: RocketMQ's messaging model in Python")
    parser.add_argument("--version", action="version", version=f"pocketmq {pocketmq.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    only = [name for name in COMMAND_MODULES if command_of(name) == command]
    # --version needs no command: importing them all (the broker's among them) takes seconds on a busy machine
    for name in () if command == "--version" else only or COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # not written yet
                continue
            raise
        module.register(sub)
    parsing.finish(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    # A command reports its own outcome; the SDK's warnings (a malformed frame, a retry) would be stray lines.
    # The long-running commands configure logging, and their records still reach that handler.
    sdk_log = logging.getLogger("pocketmq")
    if not sdk_log.handlers:  # once per process (tests call main() many times)
        sdk_log.addHandler(logging.NullHandler())
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    args = parsing.parse(parser, argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`pocketmq topic list | head`): stop as quietly as `seq` does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except (PocketMQError, OSError, ValueError) as exc:
        print_error(args, explain_failure(args, exc) or str(exc))
        return 1


if __name__ == "__main__":
    sys.exit(main())
