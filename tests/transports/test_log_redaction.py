"""URL credentials never reach a log record: not ours, and not those of the libraries under the
transports (httpx, httpcore, trio-websocket), at any level, against real servers on 127.0.0.1.

A password in an HTTP URL's user information is sent as an ``Authorization: Basic`` header, so
the URL httpx sees (and logs) has none; a query string must stay in the URL (the server reads
it), so the filter the transports install on those loggers hides its values."""

from __future__ import annotations

import base64
import logging
from functools import partial

import pytest
import trio
import trio_websocket

from tests.transports.http_fake import FakeMcpHttp, serve_http
from trio_mcp.actors.config._config import RuntimeConfig, ServerConfig, TransportKind
from trio_mcp.actors.runtime._events import ServerState
from trio_mcp.actors.runtime._runtime import open_runtime
from trio_mcp.actors.testing._fakes import FakeServer
from trio_mcp.protocol import McpTransportConfigError
from trio_mcp.transports._redact import (
    REDACTED_LOGGERS,
    RedactingFilter,
    install_log_redaction,
    redact_log_text,
    redact_url,
)
from trio_mcp.transports._websocket import accept_websocket_transport
from trio_mcp.transports.http._http_base import HttpParameters

PASSWORD = "hunter2-pa55"
QUERY_SECRET = "q-s3cret-value"
BOUND = 10.0
#: Every logger the runtime causes to write, and ours.
LOGGERS = ("trio_mcp", "httpx", "httpcore", "trio-websocket")


def debug_everywhere(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)


def leaks(caplog: pytest.LogCaptureFixture, *secrets: str) -> list[str]:
    """Every record that holds one of ``secrets`` anywhere: its message, its format, its
    arguments or any other attribute."""
    found = []
    for record in caplog.records:
        text = " ".join(
            [record.getMessage(), str(record.msg), repr(record.args), repr(vars(record))]
        )
        if any(secret in text for secret in secrets):
            found.append(f"{record.name}: {record.getMessage()}")
    return found


@pytest.mark.parametrize("kind", [TransportKind.HTTP, TransportKind.SSE])
async def test_no_url_credential_reaches_any_log_record_over_http(
    caplog: pytest.LogCaptureFixture, kind: TransportKind
) -> None:
    debug_everywhere(caplog)
    fake = FakeMcpHttp()
    if kind is TransportKind.SSE:
        from tests.transports.http_fake import FakeLegacySse

        legacy = FakeLegacySse()
        handler = legacy.handle
        path = "/sse"
    else:
        handler = fake.handle
        path = "/mcp"
    async with serve_http(handler) as server:
        url = (
            f"http://alice:{PASSWORD}@127.0.0.1:{server.port}{path}"
            f"?api_key={QUERY_SECRET}&team=blue"
        )
        config = RuntimeConfig(servers=(ServerConfig(name="h", url=url, type=kind),))
        async with open_runtime(config) as rt:
            with trio.fail_after(BOUND):
                statuses = await rt.wait_ready()
                assert statuses["h"].state is ServerState.READY, statuses["h"].last_error
                result = await rt.call("mcp_h_echo", {"text": "hello"})
        assert result.text == "hello"
    basic = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    assert server.requests
    for request in server.requests:
        if request.path == path:  # the HTTP+SSE endpoint has a query of its own
            assert f"api_key={QUERY_SECRET}" in request.query, request
        assert request.header("authorization") == basic, request
    assert leaks(caplog, PASSWORD, QUERY_SECRET, "session-1") == []
    if kind is TransportKind.HTTP:
        # Streamable HTTP's requests take the HTTP/1.1 lane (transports/http/_h1.py): httpx
        # and httpcore log nothing of them; the transport's own lines show the URL redacted.
        assert not any(r.name.startswith(("httpx", "httpcore")) for r in caplog.records)
        shown = [r.getMessage() for r in caplog.records if r.name == "trio_mcp.transports.http"]
        assert any("POST tools/call to http://127.0.0.1:" in m for m in shown), shown
        assert all("api_key" not in message for message in shown), shown
        return
    assert any(r.name == "httpx" and "HTTP Request" in r.getMessage() for r in caplog.records)
    assert any(r.name.startswith("httpcore") for r in caplog.records)
    shown = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert any("api_key=***&team=***" in message for message in shown), shown


async def test_no_url_credential_reaches_any_log_record_over_websocket(
    caplog: pytest.LogCaptureFixture,
) -> None:
    debug_everywhere(caplog)
    fake = FakeServer()
    seen: list[str] = []

    async def handle(request: trio_websocket.WebSocketRequest) -> None:
        seen.append(request.path)
        async with accept_websocket_transport(request) as transport:
            await fake.serve_transport(transport)

    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            partial(trio_websocket.serve_websocket, handle, "127.0.0.1", 0, None)
        )
        url = f"ws://127.0.0.1:{server.port}/mcp?api_key={QUERY_SECRET}"
        config = RuntimeConfig(servers=(ServerConfig(name="w", url=url, type=TransportKind.WS),))
        async with open_runtime(config) as rt:
            with trio.fail_after(BOUND):
                statuses = await rt.wait_ready()
            assert statuses["w"].state is ServerState.READY, statuses["w"].last_error
        nursery.cancel_scope.cancel()
    assert seen == [f"/mcp?api_key={QUERY_SECRET}"]
    assert any(r.name == "trio-websocket" for r in caplog.records)
    assert leaks(caplog, QUERY_SECRET) == []


def test_a_url_password_is_never_in_the_parameters_repr() -> None:
    p = HttpParameters(url=f"https://alice:{PASSWORD}@example.com/mcp?api_key={QUERY_SECRET}")
    assert PASSWORD not in repr(p)
    assert QUERY_SECRET not in repr(p)
    assert "https://alice:***@example.com/mcp?api_key=***" in repr(p)


def test_a_url_password_and_an_authorization_header_are_refused_together() -> None:
    with pytest.raises(McpTransportConfigError) as caught:
        HttpParameters(
            url=f"https://alice:{PASSWORD}@example.com/mcp", headers={"authorization": "Bearer x"}
        )
    assert caught.value.problems == (
        (
            "url",
            "holds user:password@ and headers has an Authorization header too: give the "
            "credentials one way",
        ),
    )
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            'HTTP Request: POST https://u:pw@h/mcp?api_key=k&x=1 "HTTP/1.1 200 OK"',
            'HTTP Request: POST https://u:***@h/mcp?api_key=***&x=*** "HTTP/1.1 200 OK"',
        ),
        ("GET ws://tok3n@h:8/p?q", "GET ws://***@h:8/p?q=***"),
        ("no url here", "no url here"),
        (
            "receive_response_headers.complete return_value=(b'HTTP/1.1', 200, b'OK', "
            "[(b'content-type', b'application/json'), (b'mcp-session-id', b'abc'), "
            "(b'Set-Cookie', b\"it's=1\")])",
            "receive_response_headers.complete return_value=(b'HTTP/1.1', 200, b'OK', "
            "[(b'content-type', b'application/json'), (b'mcp-session-id', b'***'), "
            "(b'Set-Cookie', b\"***\")])",
        ),
        ("port http://u:pw@h:99999/x?k=v", "port http://u:***@h:99999/x?k=***"),
        ("not a URL http://u:pw@[::1/x?k=v", "not a URL http://***@[::1/x?***"),
    ],
)
def test_log_text_is_redacted(text: str, shown: str) -> None:
    assert redact_log_text(text) == shown


def test_redact_url_keeps_the_user_and_hides_the_password() -> None:
    assert redact_url("https://u:p@h/x?a=1#f") == "https://u:***@h/x?a=***#f"
    assert redact_url("https://h/x") == "https://h/x"


def test_the_filter_is_installed_once_on_every_logger_and_formats_the_arguments() -> None:
    install_log_redaction()
    install_log_redaction()
    for name in REDACTED_LOGGERS:
        filters = [f for f in logging.getLogger(name).filters if isinstance(f, RedactingFilter)]
        assert len(filters) == 1, name
    record = logging.LogRecord(
        "httpx", logging.INFO, __file__, 1, "HTTP Request: %s %s", ("GET", "http://h/?k=v"), None
    )
    assert RedactingFilter().filter(record)
    assert (record.msg, record.args) == ("HTTP Request: GET http://h/?k=***", None)
    broken = logging.LogRecord("httpx", logging.INFO, __file__, 1, "%d http://h/?k=v", ("x",), None)
    assert RedactingFilter().filter(broken)
    assert broken.getMessage() == "%d http://h/?k=***"
