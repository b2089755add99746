"""What every ``pocketmq`` command's parser gets once all are registered (``finish``), and parsing with it.

- Help reads as plain text: the reStructuredText quotes of the docstrings the help is cut from are dropped,
  and each command ends with its examples (``pocketmq.cli.examples``), kept as written.
- A flag a command does not know is reported with that command's usage (not the top level's), with the
  closest flag it does know. With ``--json`` on the command line a usage error is the JSON error object
  (``{"command": ..., "error": ...}``) instead, as every other error of the command is: a script reads one
  format. Either way the exit status is 2.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterator
from types import SimpleNamespace

from pocketmq.cli.examples import EXAMPLES
from pocketmq.cli.terminal import print_error

_EXAMPLES_HEADING = "examples:"


class PlainHelpFormatter(argparse.HelpFormatter):
    """Reflows text as argparse does, without ````quotes````; the examples paragraph stays as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        fill = super()._fill_text
        paragraphs = re.split(r"\n\s*\n", text.replace("``", ""))
        return "\n\n".join(p if p.startswith(_EXAMPLES_HEADING) else fill(p, width, indent) for p in paragraphs)

    def _expand_help(self, action: argparse.Action) -> str:
        return super()._expand_help(action).replace("``", "")


class CommandParser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are JSON when the command line asks for JSON output."""

    json_errors = False

    def error(self, message: str):
        if not self.json_errors:
            super().error(message)
        command = self.prog.split()[1] if " " in self.prog else self.prog
        print_error(SimpleNamespace(command=command, json=True), message)
        sys.exit(2)


def all_parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """``parser`` and every sub-command parser under it, each with its command path (``("topic", "create")``)."""
    stack: list[tuple[tuple[str, ...], argparse.ArgumentParser]] = [((), parser)]
    while stack:
        path, current = stack.pop()
        yield path, current
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(((*path, name), sub) for name, sub in action.choices.items())


def finish(parser: argparse.ArgumentParser) -> None:
    """Plain help, examples and the usage for errors on ``parser`` and every sub-command parser under it."""
    for path, command in all_parsers(parser):
        command.formatter_class = PlainHelpFormatter
        command.set_defaults(usage_parser=command)  # the deepest command parsed sets it last
        examples = EXAMPLES.get(path)
        if examples:
            command.epilog = "\n".join([_EXAMPLES_HEADING, *(f"  {line}" for line in examples)])


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    json_errors = "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv
    for _, each in all_parsers(parser):
        if isinstance(each, CommandParser):
            each.json_errors = json_errors
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command: argparse.ArgumentParser = getattr(args, "usage_parser", parser)
        message = f"unrecognized arguments: {' '.join(unknown)}"
        flags = [s for a in command._actions for s in a.option_strings if s.startswith("--")]
        close = [match for arg in unknown for match in difflib.get_close_matches(arg.split("=")[0], flags, n=1)]
        command.error(message + (f" (did you mean {close[0]}?)" if close else ""))
    return args
