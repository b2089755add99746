"""HTTP basic auth onto the brokers' users: the user name and password a browser or script sends are the access
key and secret key the console signs that user's requests with (docs/console.md, docs/security.md)."""

from __future__ import annotations

import binascii

from aiohttp import BasicAuth, web

from pocketmq.client.admin import AsyncAdmin
from pocketmq.console.admins import AdminPool
from pocketmq.console.errors import Unauthenticated

POOL_KEY = web.AppKey("admins", AdminPool)
LOGIN_REQUIRED_KEY = web.AppKey("login_required", bool)


def credentials(request: web.Request) -> tuple[str, str] | None:
    header = request.headers.get("Authorization")
    if header is None:
        if request.app[LOGIN_REQUIRED_KEY]:
            raise Unauthenticated("access control is on: log in with a user of the brokers")
        return None
    try:
        auth = BasicAuth.decode(header, encoding="utf-8")  # the charset the realm header asks browsers for
    except (ValueError, binascii.Error):
        raise Unauthenticated("Authorization: expected Basic credentials") from None
    return auth.login, auth.password


async def admin_of(request: web.Request) -> AsyncAdmin:
    """The admin client that signs as the request's user."""
    return await request.app[POOL_KEY].admin(credentials(request))
