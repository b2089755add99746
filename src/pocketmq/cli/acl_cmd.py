"""``pocketmq acl user|policy``: users and their access policies on every master broker (docs/security.md).

- ``user create NAME [--password P] [--super] [--disabled]``: the password comes from ``--password`` or
  ``$POCKETMQ_ACL_PASSWORD`` (the environment keeps it out of the process list); it is never printed.
- ``user update NAME [--password P] [--type super|normal] [--enable|--disable]``: what is not given stays.
- ``user delete NAME`` (its policies go with it), ``user list [--filter TEXT]``.
- ``policy create|update NAME --resource R [--resource R ...] --actions Pub,Sub [--decision allow|deny]
  [--source-ips CIDR,...] [--policy-type custom|default]``: entries for those resources are added or replaced.
- ``policy delete NAME [--resource R ...] [--policy-type T]``, ``policy list [--user NAME] [--resource TEXT]``.
- ``import plain_acl.yml``: ACL 1.0 accounts as users and policies (auth/acl1.py); an existing user is updated.
  What has no ACL 2.0 form (address white lists, address ranges) is named on stderr.

The command signs its requests with ``--access-key/--secret-key`` (or ``$POCKETMQ_ACCESS_KEY`` /
``$POCKETMQ_SECRET_KEY``): a Super user's, in practice.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pocketmq.auth.acl1 import convert_plain_acl
from pocketmq.cli.output import add_action, print_rows, report, run_admin
from pocketmq.client.admin import AsyncAdmin
from pocketmq.common.errors import BadRequestError
from pocketmq.protocol.codes import (
    AUTH_CREATE_ACL,
    AUTH_CREATE_USER,
    AUTH_DELETE_ACL,
    AUTH_DELETE_USER,
    AUTH_LIST_ACL,
    AUTH_LIST_USER,
    AUTH_UPDATE_ACL,
    AUTH_UPDATE_USER,
)

PASSWORD_ENV = "POCKETMQ_ACL_PASSWORD"
USER_COLUMNS = ["username", "type", "status"]
POLICY_COLUMNS = ["user", "policy_type", "resource", "actions", "decision", "source_ips"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("acl", help="users and access policies", description=__doc__.split("\n\n")[0])
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    users = kinds.add_parser("user", help="users").add_subparsers(dest="action", metavar="ACTION", required=True)
    p = add_action(users, "create", "create a user", user_create, "username")
    p.add_argument("--password", help=f"its secret key (default: ${PASSWORD_ENV})")
    p.add_argument("--super", action="store_true", help="a Super user: never refused anything")
    p.add_argument("--disabled", action="store_true", help="created disabled")
    p = add_action(users, "update", "change a user", user_update, "username")
    p.add_argument("--password", help=f"a new secret key (default: ${PASSWORD_ENV} when set)")
    p.add_argument("--type", choices=("super", "normal"))
    status = p.add_mutually_exclusive_group()
    status.add_argument("--enable", dest="status", action="store_const", const="enable")
    status.add_argument("--disable", dest="status", action="store_const", const="disable")
    add_action(users, "delete", "delete a user and its policies", user_delete, "username")
    p = add_action(users, "list", "list users (never their secrets)", user_list)
    p.add_argument("--filter", default="", help="only names containing this")

    policies = kinds.add_parser("policy", help="access policies").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    for name, code in (("create", AUTH_CREATE_ACL), ("update", AUTH_UPDATE_ACL)):
        p = add_action(policies, name, f"{name} policy entries of a user", policy_put, "username")
        p.set_defaults(code=code)
        p.add_argument("--resource", action="append", required=True, help="*, Topic:NAME, Topic:PREFIX*, Group:...")
        p.add_argument("--actions", required=True, help="comma-separated: All, Pub, Sub, Create, Update, ...")
        p.add_argument("--decision", default="Allow", help="Allow (default) or Deny")
        p.add_argument("--source-ips", default="", help="comma-separated addresses or CIDR ranges (default: any)")
        p.add_argument("--policy-type", default="Custom", help="Custom (default) or Default")
    p = add_action(policies, "delete", "delete a user's policies, or some of their entries", policy_delete, "username")
    p.add_argument("--resource", action="append", default=[], help="only the entries of this resource")
    p.add_argument("--policy-type", default="", help="only this policy type")
    add_action(kinds, "import", "convert an ACL 1.0 plain_acl.yml into users and policies", acl_import, "file")
    p = add_action(policies, "list", "list policies", policy_list)
    p.add_argument("--user", default="", help="only users whose name contains this")
    p.add_argument("--resource", default="", help="only entries whose resource contains this")


def _password(args, *, required: bool) -> str | None:
    password = args.password or os.environ.get(PASSWORD_ENV) or None
    if required and not password:
        raise BadRequestError(f"a password is needed: --password or ${PASSWORD_ENV}")
    return password


def user_create(args) -> int:
    user = {
        "username": args.username,
        "password": _password(args, required=True),
        "userType": "Super" if args.super else "Normal",
        "userStatus": "disable" if args.disabled else "enable",
    }

    return _user_change(args, AUTH_CREATE_USER, "created", user)


def user_update(args) -> int:
    changes = {"username": args.username}
    password = _password(args, required=False)
    if password:
        changes["password"] = password
    if args.type:
        changes["userType"] = args.type.capitalize()
    if args.status:
        changes["userStatus"] = args.status

    return _user_change(args, AUTH_UPDATE_USER, "updated", changes)


def user_delete(args) -> int:
    return _user_change(args, AUTH_DELETE_USER, "deleted", None)


def _user_change(args, code: int, done: str, body: dict | None) -> int:
    async def action(admin: AsyncAdmin) -> None:
        brokers = await admin.auth_change(code, {"username": args.username}, body)
        report(
            args, {"user": args.username, "brokers": brokers}, f"{done} user {args.username} on {', '.join(brokers)}"
        )

    return run_admin(args, action)


def user_list(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        users = await admin.auth_read(AUTH_LIST_USER, {"filter": args.filter})
        rows = [
            {"username": u.get("username"), "type": u.get("userType"), "status": u.get("userStatus")}
            for u in users or []
        ]
        print_rows(args, rows, USER_COLUMNS)

    return run_admin(args, action)


def policy_put(args) -> int:
    entries = [
        {
            "resource": resource,
            "actions": [a.strip() for a in args.actions.split(",") if a.strip()],
            "sourceIps": [ip.strip() for ip in args.source_ips.split(",") if ip.strip()],
            "decision": args.decision,
        }
        for resource in args.resource
    ]
    subject = f"User:{args.username}"
    acl = {"subject": subject, "policies": [{"policyType": args.policy_type, "entries": entries}]}

    async def action(admin: AsyncAdmin) -> None:
        brokers = await admin.auth_change(args.code, {"subject": subject}, acl)
        report(args, {"user": args.username, "brokers": brokers}, f"policy of {subject} set on {', '.join(brokers)}")

    return run_admin(args, action)


def policy_delete(args) -> int:
    subject = f"User:{args.username}"
    fields = {"subject": subject, "policyType": args.policy_type, "resource": ",".join(args.resource)}

    async def action(admin: AsyncAdmin) -> None:
        brokers = await admin.auth_change(AUTH_DELETE_ACL, fields)
        report(
            args, {"user": args.username, "brokers": brokers}, f"policy of {subject} deleted on {', '.join(brokers)}"
        )

    return run_admin(args, action)


def policy_list(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        acls = await admin.auth_read(AUTH_LIST_ACL, {"subjectFilter": args.user, "resourceFilter": args.resource})
        rows = [
            {
                "user": acl["subject"].removeprefix("User:"),
                "policy_type": policy.get("policyType"),
                "resource": entry.get("resource"),
                "actions": ",".join(entry.get("actions") or []),
                "decision": entry.get("decision"),
                "source_ips": ",".join(entry.get("sourceIps") or []) or "*",
            }
            for acl in acls or []
            for policy in acl.get("policies") or []
            for entry in policy.get("entries") or []
        ]
        print_rows(args, rows, POLICY_COLUMNS)

    return run_admin(args, action)


def acl_import(args) -> int:
    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadRequestError(f"cannot read {args.file}: {exc.strerror}") from None
    converted = convert_plain_acl(text)
    for warning in converted.warnings:
        print(f"warning: {warning}", file=sys.stderr)

    async def action(admin: AsyncAdmin) -> None:
        existing = {u.get("username") for u in await admin.auth_read(AUTH_LIST_USER, {"filter": ""}) or []}
        for user in converted.users:
            code = AUTH_UPDATE_USER if user.username in existing else AUTH_CREATE_USER
            await admin.auth_change(code, {"username": user.username}, user.to_json())
        for acl in converted.acls:
            await admin.auth_change(AUTH_CREATE_ACL, {"subject": acl.subject}, acl.to_json())
        report(
            args,
            {"users": len(converted.users), "acls": len(converted.acls), "warnings": converted.warnings},
            f"imported {len(converted.users)} user(s) and {len(converted.acls)} policy set(s) from {args.file}",
        )

    return run_admin(args, action)
