"""``pocketmq completion bash|zsh|fish``: prints a shell completion script for every command and flag.

The script is generated from the parser itself, so a new command or flag completes as soon as it exists.
Install: ``eval "$(pocketmq completion bash)"`` in ``~/.bashrc``, the same with ``zsh`` in ``~/.zshrc``, and
``pocketmq completion fish | source`` in ``~/.config/fish/config.fish``.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "fish")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "completion", help="print a shell completion script (bash, zsh, fish)", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(func=run)


def command_tree(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(path, words, long flags)`` for ``parser`` and every command under it, depth first: the words are its
    sub-commands, or the values a positional takes."""
    names: list[str] = []
    children = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            names += list(action.choices)
            children += [(name, sub) for name, sub in action.choices.items()]
        elif not action.option_strings and action.choices:
            names += [str(choice) for choice in action.choices]  # a positional's values (the shell's name)
    flags = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
    yield path, names, flags
    for name, sub in children:
        yield from command_tree(sub, (*path, name))


def bash_script(tree) -> str:
    paths = [path for path, _, _ in tree if path]
    known = "|".join("/" + "/".join(path) for path in paths)
    cases = "\n".join(
        f'        "{"/" + "/".join(path) if path else ""}") words="{" ".join(names + flags)}" ;;'
        for path, names, flags in tree
    )
    return f"""# pocketmq completion for bash (and zsh through bashcompinit)
_pocketmq() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" path="" word words i
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        case "$path/$word" in
            {known}) path="$path/$word" ;;
        esac
    done
    case "$path" in
{cases}
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F _pocketmq pocketmq
"""


def zsh_script(tree) -> str:
    return "# pocketmq completion for zsh\nautoload -U +X bashcompinit && bashcompinit\n" + bash_script(tree)


def fish_script(tree) -> str:
    lines = ["# pocketmq completion for fish", "complete -c pocketmq -f"]
    for path, names, flags in tree:
        if path:
            seen = "; and ".join(f"__fish_seen_subcommand_from {word}" for word in path)
        else:
            seen = "__fish_use_subcommand"
        if names and path:
            seen += f"; and not __fish_seen_subcommand_from {' '.join(names)}"
        for name in names:
            lines.append(f"complete -c pocketmq -n '{seen}' -a {name}")
        for flag in flags:
            lines.append(f"complete -c pocketmq -n '{seen}' -l {flag[2:]}")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    from pocketmq.cli.main import build_parser  # the whole parser, this command included

    tree = list(command_tree(build_parser()))
    script = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell](tree)
    print(script, end="")
    return 0
