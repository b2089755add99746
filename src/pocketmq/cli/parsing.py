"""What every ``pocketmq`` command's parser gets once all are registered (``finish``), and parsing with it.

- Help reads as plain text: the reStructuredText quotes of the docstrings the help is cut from are dropped,
  and each command ends with its examples (``pocketmq.cli.examples``), kept as written.
- A flag a command does not know is reported with that command's usage (not the top level's), with the
  closest flag it does know.
"""

from __future__ import annotations

import argparse
import difflib
import re

from pocketmq.cli.examples import EXAMPLES

_EXAMPLES_HEADING = "examples:"


class PlainHelpFormatter(argparse.HelpFormatter):
    """Reflows text as argparse does, without ````quotes````; the examples paragraph stays as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        fill = super()._fill_text
        paragraphs = re.split(r"\n\s*\n", text.replace("``", ""))
        return "\n\n".join(p if p.startswith(_EXAMPLES_HEADING) else fill(p, width, indent) for p in paragraphs)

    def _expand_help(self, action: argparse.Action) -> str:
        return super()._expand_help(action).replace("``", "")


def finish(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> None:
    """Plain help, examples and the usage for errors on ``parser`` and every sub-command parser under it."""
    parser.formatter_class = PlainHelpFormatter
    parser.set_defaults(usage_parser=parser)  # the deepest command parsed sets it last
    examples = EXAMPLES.get(path)
    if examples:
        parser.epilog = "\n".join([_EXAMPLES_HEADING, *(f"  {line}" for line in examples)])
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                finish(sub, (*path, name))


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command: argparse.ArgumentParser = getattr(args, "usage_parser", parser)
        message = f"unrecognized arguments: {' '.join(unknown)}"
        flags = [s for a in command._actions for s in a.option_strings if s.startswith("--")]
        close = [match for arg in unknown for match in difflib.get_close_matches(arg.split("=")[0], flags, n=1)]
        command.error(message + (f" (did you mean {close[0]}?)" if close else ""))
    return args
