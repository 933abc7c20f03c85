"""A separate process for the two-process refresh test: an Authorizer on a FileTokenStore
directory, whose wall clock is ``offset`` seconds ahead (so the stored token has run out),
sends one request to the resource and prints its status.

Usage: python oauth_refresher.py DIRECTORY MCP_URL OFFSET"""

from __future__ import annotations

import sys
import time

import httpx
import trio

from trio_mcp.transports.http import HttpParameters
from trio_mcp.transports.oauth import FileTokenStore, OAuthSettings, open_authorizer


async def main(directory: str, url: str, offset: float) -> None:
    async with (
        open_authorizer(
            server="srv",
            settings=OAuthSettings(),
            store=FileTokenStore(directory),
            http=HttpParameters(url=url),
            clock=lambda: time.time() + offset,
        ) as signer,
        httpx.AsyncClient(auth=signer.auth) as client,
    ):
        response = await client.post(url, content=b"{}")
    print(response.status_code)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], float(sys.argv[3]))
