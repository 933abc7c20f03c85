"""The loopback redirect receiver: real GETs on 127.0.0.1."""

from __future__ import annotations

import httpx
import pytest
import trio
import trio.testing

from trio_mcp.protocol import AuthorizationError
from trio_mcp.transports.oauth._loopback import open_loopback_receiver


async def test_the_one_redirect_is_taken_and_answered_with_a_short_page() -> None:
    with trio.fail_after(10):
        async with open_loopback_receiver() as receiver:
            assert receiver.redirect_uri.startswith("http://127.0.0.1:")
            assert receiver.redirect_uri.endswith("/callback")
            async with httpx.AsyncClient() as client:
                answer = await client.get(receiver.redirect_uri + "?code=c-1&state=s-1")
                assert answer.status_code == 200
                assert "you can close this tab" in answer.text
                assert "c-1" not in answer.text and "s-1" not in answer.text
                assert answer.headers["cache-control"] == "no-store"
                assert await receiver.wait() == receiver.redirect_uri + "?code=c-1&state=s-1"
                assert "c-1" not in repr(receiver)  # the code is a secret: not in a repr
                # one redirect only
                again = await client.get(receiver.redirect_uri + "?code=c-2&state=s-2")
                assert again.status_code == 409
                assert await receiver.wait() == receiver.redirect_uri + "?code=c-1&state=s-1"


async def test_only_a_get_of_the_exact_path_counts() -> None:
    with trio.fail_after(10):
        async with open_loopback_receiver(path="/cb") as receiver:
            base = receiver.redirect_uri.removesuffix("/cb")
            async with httpx.AsyncClient() as client:
                assert (await client.get(base + "/favicon.ico")).status_code == 404
                assert (await client.get(base + "/cb/x?code=1")).status_code == 404
                assert (await client.post(receiver.redirect_uri + "?code=1")).status_code == 405
                huge = {"x-filler": "a" * 20_000}
                assert (await client.get(receiver.redirect_uri, headers=huge)).status_code == 431
                error = await client.get(receiver.redirect_uri + "?error=access_denied&state=s")
                assert error.status_code == 200 and "reported an error" in error.text
            assert await receiver.wait() == receiver.redirect_uri + "?error=access_denied&state=s"


async def test_no_redirect_in_time_is_a_clear_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_loopback_receiver(timeout=120) as receiver:
        with pytest.raises(AuthorizationError) as caught:
            await receiver.wait()
        assert trio.current_time() == 120.0
        assert str(caught.value) == (
            f"no sign-in redirect arrived at {receiver.redirect_uri} within 120 s: finish "
            "signing in in the browser, or sign in with --no-browser (paste the URL the browser "
            "ends at) or --device"
        )


async def test_a_fixed_port_is_listened_on() -> None:
    async with open_loopback_receiver() as first:
        port = int(first.redirect_uri.split(":")[2].split("/")[0])
    async with open_loopback_receiver(port=port) as second:
        assert second.redirect_uri == f"http://127.0.0.1:{port}/callback"
