"""ACL 1.0's ``plain_acl.yml`` converted to ACL 2.0 users and policies (``pocketmq acl import``, docs/security.md).

Each account becomes a user (``admin: true`` -> a Super user, as ACL 1.0 admins pass every check) and, for a
normal user, a Custom policy:

| plain_acl.yml | entry |
|---|---|
| ``topicPerms: [name=PERM]`` | ``Topic:name``: PUB -> Allow Pub, SUB -> Allow Sub, PUB\\|SUB -> Allow Pub, Sub; DENY -> Deny both |
| ``groupPerms: [name=PERM]`` | ``Group:name``, the same (a group's SUB is what consuming needs) |
| ``defaultTopicPerm`` / ``defaultGroupPerm`` | ``Topic:*`` / ``Group:*`` with that permission (ACL 1.0's default is DENY) |
| ``whiteRemoteAddress`` | the entries' ``sourceIps`` when it is an address, ``a.b.c.*`` or a CIDR |

ACL 1.0 let a white-listed address skip the signature; ACL 2.0 has no such thing, so ``globalWhiteRemoteAddresses``
and address forms without a CIDR equivalent (ranges ``1-100``, lists ``{1,2}``) are reported, not converted.

The file is read with a reader of the YAML subset those files use (block mappings and lists, scalars, ``#``
comments, flow lists ``[a, b]``): PocketMQ has no YAML dependency.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from pocketmq.auth.model import (
    Acl,
    AclFormatError,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    ResourcePattern,
    User,
    UserType,
)

_PERM_ACTIONS = {
    "PUB": (frozenset({Action.PUB}), Decision.ALLOW),
    "SUB": (frozenset({Action.SUB}), Decision.ALLOW),
    "PUB|SUB": (frozenset({Action.PUB, Action.SUB}), Decision.ALLOW),
    "SUB|PUB": (frozenset({Action.PUB, Action.SUB}), Decision.ALLOW),
    "DENY": (frozenset({Action.PUB, Action.SUB}), Decision.DENY),
}


@dataclass
class Converted:
    users: list[User] = field(default_factory=list)
    acls: list[Acl] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what could not be carried over, one line each


def convert_plain_acl(text: str) -> Converted:
    """The users and ACLs of a ``plain_acl.yml``; AclFormatError when it does not parse."""
    document = read_yaml(text)
    if not isinstance(document, dict):
        raise AclFormatError("plain_acl.yml must be a mapping with an accounts list")
    out = Converted()
    if document.get("globalWhiteRemoteAddresses"):
        out.warnings.append("globalWhiteRemoteAddresses not converted: ACL 2.0 has no address white list")
    accounts = document.get("accounts") or []
    if not isinstance(accounts, list):
        raise AclFormatError("accounts must be a list")
    for i, account in enumerate(accounts):
        if not isinstance(account, dict) or not account.get("accessKey") or not account.get("secretKey"):
            raise AclFormatError(f"account {i} needs accessKey and secretKey")
        name = str(account["accessKey"])
        admin = str(account.get("admin", "false")).lower() == "true"
        out.users.append(User(name, str(account["secretKey"]), UserType.SUPER if admin else UserType.NORMAL))
        if admin:
            continue
        source_ips = _source_ips(account.get("whiteRemoteAddress"), name, out.warnings)
        entries = []
        for key, resource_type in (("topicPerms", "Topic"), ("groupPerms", "Group")):
            for line in account.get(key) or []:
                resource, _, perm = str(line).partition("=")
                entries.append(_entry(f"{resource_type}:{resource.strip()}", perm, source_ips, name))
        for key, resource in (("defaultTopicPerm", "Topic:*"), ("defaultGroupPerm", "Group:*")):
            entries.append(_entry(resource, str(account.get(key) or "DENY"), source_ips, name))
        out.acls.append(Acl(User(name, "-").subject, (Policy(PolicyType.CUSTOM, tuple(entries)),)))
    return out


def _entry(resource: str, perm: str, source_ips: tuple, account: str) -> PolicyEntry:
    known = _PERM_ACTIONS.get(perm.strip().upper().replace(" ", ""))
    if known is None:
        raise AclFormatError(f"account {account}: {resource}: permission {perm!r} is not DENY, PUB, SUB or PUB|SUB")
    actions, decision = known
    return PolicyEntry(ResourcePattern.parse(resource), actions, decision, source_ips)


def _source_ips(pattern: Any, account: str, warnings: list[str]) -> tuple:
    text = str(pattern or "").strip()
    if not text or text in ("*", "*.*.*.*"):
        return ()
    parts = text.split(".")
    if len(parts) == 4 and "*" in parts:
        stars = parts.index("*")
        if all(p == "*" for p in parts[stars:]):
            prefix = ".".join(parts[:stars] + ["0"] * (4 - stars))
            return (ipaddress.ip_network(f"{prefix}/{8 * stars}"),)
    try:
        return (ipaddress.ip_network(text, strict=False),)
    except ValueError:
        warnings.append(f"account {account}: whiteRemoteAddress {text!r} has no CIDR form: not converted")
        return ()


# -- the YAML subset ------------------------------------------------------------------------------------------------
def read_yaml(text: str) -> Any:
    lines: list[tuple[int, str]] = []
    for raw in text.splitlines():
        line = _strip_comment(raw).rstrip()
        if line.strip():
            _add_line(lines, len(line) - len(line.lstrip(" ")), line.strip())
    value, end = _block(lines, 0, lines[0][0] if lines else 0)
    if end != len(lines):
        raise AclFormatError(f"plain_acl.yml: cannot read line {lines[end][1]!r}")
    return value


def _add_line(lines: list[tuple[int, str]], indent: int, text: str) -> None:
    """A list item with content on its line (``- key: v``, ``- x``) becomes ``-`` and the content below it, at
    the column the content starts: the mapping it opens goes on at that column."""
    if text.startswith("- "):
        rest = text[2:].lstrip()
        lines.append((indent, "-"))
        _add_line(lines, indent + len(text) - len(rest), rest)
    else:
        lines.append((indent, text))


def _strip_comment(line: str) -> str:
    if line.lstrip().startswith("#"):
        return ""
    cut = line.find(" #")
    return line if cut < 0 else line[:cut]


def _block(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[Any, int]:
    """The block (a list, a mapping or a scalar) whose lines start at ``i`` with ``indent``; (value, next line)."""
    if lines[i][1] == "-":
        items = []
        while i < len(lines) and lines[i] == (indent, "-"):
            if i + 1 < len(lines) and lines[i + 1][0] > indent:
                value, i = _block(lines, i + 1, lines[i + 1][0])
            else:
                value, i = None, i + 1
            items.append(value)
        return items, i
    if not _is_pair(lines[i][1]):
        return _scalar(lines[i][1]), i + 1
    mapping: dict[str, Any] = {}
    while i < len(lines) and lines[i][0] == indent and _is_pair(lines[i][1]):
        key, _, rest = lines[i][1].partition(":")
        rest = rest.strip()
        i += 1
        nested = i < len(lines) and (lines[i][0] > indent or (lines[i][0] == indent and lines[i][1] == "-"))
        if rest:
            mapping[key.strip()] = _scalar(rest)
        elif nested:
            mapping[key.strip()], i = _block(lines, i, lines[i][0])
        else:
            mapping[key.strip()] = None
    return mapping, i


def _is_pair(text: str) -> bool:
    key, sep, rest = text.partition(":")
    return bool(sep) and bool(key.strip()) and (not rest or rest.startswith(" ")) and not key.startswith(("'", '"'))


def _scalar(text: str) -> Any:
    if text.startswith("[") and text.endswith("]"):
        return [_scalar(part.strip()) for part in text[1:-1].split(",") if part.strip()]
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text
