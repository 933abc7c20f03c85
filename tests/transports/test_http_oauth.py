"""The HTTP transports (Streamable HTTP and legacy HTTP+SSE) with an Authorizer as their
``auth``, against the fake OAuth world on 127.0.0.1: a 401 is answered by signing in and the
same request (the same body) goes again; an AuthorizationError raised in the auth flow comes
out of the transport as itself (the connection attempt fails with it, a call fails with it, and
the connection ends with it), never as a generic TransportClosed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from tests.transports.http_fake import FakeLegacySse, FakeMcpHttp, text_result
from tests.transports.test_http import (
    accepted_initialized,
    call,
    initialize,
    opened,
    response,
    take,
    take_failed,
    take_json,
)
from trio_mcp.actors.testing import FakeOAuthServer, headless_sign_in
from trio_mcp.protocol import AuthorizationRequired, CredentialsRefused
from trio_mcp.transports._base import ConnectionEnded
from trio_mcp.transports.http import HttpParameters, open_sse_transport
from trio_mcp.transports.oauth import (
    AuthorizationPrompt,
    Authorizer,
    MemoryTokenStore,
    OAuthSettings,
)


@asynccontextmanager
async def signer_for(
    url: str, prompt: AuthorizationPrompt | None = headless_sign_in
) -> AsyncIterator[Authorizer]:
    authorizer = Authorizer(
        server="srv",
        settings=OAuthSettings(),
        store=MemoryTokenStore(),
        http=HttpParameters(url=url),
        prompt=prompt,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(authorizer.run)
        yield authorizer
        nursery.cancel_scope.cancel()


def params(url: str, signer: Authorizer) -> HttpParameters:
    return HttpParameters(url=url, connect_timeout=5.0, reconnect_delay=0.05, auth=signer.auth)


async def test_a_401_signs_in_and_the_same_initialize_goes_again() -> None:
    mcp = FakeMcpHttp()
    async with FakeOAuthServer(mcp=mcp).serve() as fake, signer_for(fake.mcp_url) as signer:
        async with opened(params(fake.mcp_url, signer)) as (t, inbox):
            await initialize(t, inbox)
            await t.send(call(2, "echo", text="signed in"))
            assert await take_json(inbox) == response(2, text_result("signed in"))
        first, second = fake.resource_requests[:2]
        assert first.body == second.body and b'"initialize"' in first.body
        assert first.header("authorization") is None
        assert (second.header("authorization") or "").startswith("Bearer ")
        assert mcp.initializes == 1


async def test_without_a_sign_in_the_initialize_fails_with_authorization_required() -> None:
    async with (
        FakeOAuthServer(mcp=FakeMcpHttp()).serve() as fake,
        signer_for(fake.mcp_url, prompt=None) as signer,
        opened(params(fake.mcp_url, signer)) as (t, inbox),
    ):
        await t.send(
            b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": '
            b'{"protocolVersion": "2025-11-25", "capabilities": {}, '
            b'"clientInfo": {"name": "t", "version": "0"}}}'
        )
        failed = await take_failed(inbox)
        end = await take(inbox)  # the connection ended with it = the_rest(inbox)
    assert isinstance(failed.error, AuthorizationRequired)
    assert (failed.request_id, failed.sent) == (1, False)
    assert failed.error.hint == "trio-mcp login srv"
    assert isinstance(end, ConnectionEnded) and end.error is failed.error
    assert end.unsent == frozenset()


async def test_a_call_refused_without_a_bearer_challenge_fails_with_credentials_refused() -> None:
    mcp = FakeMcpHttp(get_stream=False)  # no GET stream: the call alone meets the refusal
    async with (
        FakeOAuthServer(mcp=mcp).serve() as fake,
        signer_for(fake.mcp_url) as signer,
        opened(params(fake.mcp_url, signer)) as (t, inbox),
    ):
        await initialize(t, inbox)
        await accepted_initialized(mcp)
        with trio.fail_after(5):  # the GET stream was tried (and refused with 405) too
            await mcp.wait_until(lambda: any(r.method == "GET" for r in fake.resource_requests))
        fake.tokens.clear()  # the server forgets the token and stops saying how to sign in
        fake.raw_challenge = ""
        await t.send(call(2, "echo", text="x"))
        failed = await take_failed(inbox)
        end = await take(inbox)
    assert isinstance(failed.error, CredentialsRefused)
    assert (failed.request_id, failed.sent) == (2, False)
    assert "the server refused the credentials" in str(failed.error)
    assert "headers" in str(failed.error)
    assert isinstance(end, ConnectionEnded) and end.error is failed.error


async def test_legacy_sse_signs_in_on_the_event_stream_and_the_posts() -> None:
    legacy = FakeLegacySse()
    fake = FakeOAuthServer(mcp=legacy, prm_at="root")
    async with fake.serve():
        assert fake.resource_server is not None
        url = f"{fake.resource_server.base}/sse"
        async with signer_for(url) as signer, open_sse_transport(params(url, signer)) as t:
            await t.send(call(1, "echo", text="old"))
            with trio.fail_after(5):
                answer = await t.receive()
        gets = [r for r in fake.resource_requests if r.method == "GET"]
        assert gets[0].header("authorization") is None
        assert all((r.header("authorization") or "").startswith("Bearer ") for r in gets[1:])
        posts = [r for r in fake.resource_requests if r.method == "POST"]
        assert posts and all(r.header("authorization") for r in posts)
    assert isinstance(answer, bytes) and b'"old"' in answer


async def test_legacy_sse_without_a_sign_in_fails_the_connection_attempt_with_it() -> None:
    fake = FakeOAuthServer(mcp=FakeLegacySse(), prm_at="root")
    async with fake.serve():
        assert fake.resource_server is not None
        url = f"{fake.resource_server.base}/sse"
        async with signer_for(url, prompt=None) as signer:
            with pytest.raises(AuthorizationRequired, match="trio-mcp login srv"):
                async with open_sse_transport(params(url, signer)):
                    pass
