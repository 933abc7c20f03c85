"""The command line's sign-in end to end: ``trio-mcp login`` / ``auth status`` / ``status`` /
``logout`` with the real sign-in and file store, against the fake OAuth world
(:class:`~trio_mcp.actors.testing.FakeOAuthServer`, in a thread of its own: ``main()`` runs its
own trio run). The browser is simulated (``webbrowser.open`` fetches the URL and follows the
redirect to the loopback receiver); the user who pastes is a stdin that reads the URL the
command printed, opens it and "pastes" where it ended."""

from __future__ import annotations

import io
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import tests.actors.oauth_fakes as oauth_fakes
from trio_mcp.actors.cli import ExitCode, main
from trio_mcp.actors.testing import FakeOAuthServer, FakeServer, FakeTool

SECRETS = ("access-", "refresh-", "code-", "dynamic-secret")


class World:
    """The fake world served by a trio run in another thread, for the duration of a test."""

    def __init__(self, fake: FakeOAuthServer) -> None:
        self.fake = fake
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(target=trio.run, args=(self._serve,), daemon=True)

    async def _serve(self) -> None:
        self._stop = trio.Event()
        async with self.fake.serve():
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> FakeOAuthServer:
        self._thread.start()
        assert self._ready.wait(10), "the fake world did not start"
        return self.fake

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(10)


@pytest.fixture
def world() -> Iterator[FakeOAuthServer]:
    with World(FakeOAuthServer(mcp=FakeServer(name="web", tools=[FakeTool("echo")]))) as fake:
        yield fake


@pytest.fixture(autouse=True)
def credentials_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's configuration folder (where credentials/ goes) is the test's."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home"))
    return tmp_path / "home" / "trio-mcp" / "credentials"


def write_config(tmp_path: Path, url: str, **oauth: Any) -> str:
    entry: dict[str, Any] = {"url": url, "auth": "oauth", "timeout": 10}
    if oauth:
        entry["oauth"] = oauth
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"web": entry}}))
    return str(path)


class Terminal:
    """stdout and stderr of one command, and its stdin: a user who, when asked to paste, takes
    the last URL the command printed, opens it (the authorization server approves at once) and
    pastes the URL the browser ended at. ``wait``: a user who never pastes."""

    def __init__(self, *, wait: threading.Event | None = None) -> None:
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.wait = wait

    def isatty(self) -> bool:
        return False

    def readline(self) -> str:
        if self.wait is not None:
            self.wait.wait(30)
            return ""
        printed = self.stderr.getvalue().splitlines()
        url = [line for line in printed if line.startswith(("http://", "https://"))][-1]
        answer = httpx.get(url, follow_redirects=False, timeout=10)
        assert answer.status_code == 302
        return answer.headers["location"] + "\n"


def run(monkeypatch: pytest.MonkeyPatch, *argv: str, terminal: Terminal | None = None) -> Any:
    terminal = terminal or Terminal()
    monkeypatch.setattr("sys.stdout", terminal.stdout)
    monkeypatch.setattr("sys.stderr", terminal.stderr)
    monkeypatch.setattr("sys.stdin", terminal)
    code = main(list(argv))
    return code, terminal.stdout.getvalue(), terminal.stderr.getvalue()


class Browser:
    """``webbrowser.open``: goes to the URL and follows the redirect (to the loopback
    receiver of ``trio-mcp login``)."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.landed: list[str] = []

    def __call__(self, url: str) -> bool:
        self.opened.append(url)
        answer = httpx.get(url, follow_redirects=True, timeout=10)
        self.landed.append(answer.text)
        return True


class Opened:
    """``webbrowser.open`` that only records the URL (the user then pastes)."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def __call__(self, url: str) -> bool:
        self.urls.append(url)
        return True


def test_login_auth_status_status_and_logout(
    world: FakeOAuthServer,
    tmp_path: Path,
    credentials_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    browser = Browser()
    monkeypatch.setattr("webbrowser.open", browser)
    config = write_config(tmp_path, world.mcp_url)
    code, out, err = run(monkeypatch, "login", "web", "--config", config)
    assert code == ExitCode.OK, err
    (url,) = browser.opened
    assert url.startswith(f"{world.issuer}/authorize?") and url in err.splitlines()
    assert "you can close this tab" in browser.landed[0]
    (authorization,) = world.authorizations
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/callback", authorization["redirect_uri"])
    assert out.startswith(f"signed in to 'web' (issuer {world.issuer}; scopes: -; expires: ")
    assert out.rstrip().endswith("refresh token: yes)")
    assert len(list(credentials_home.glob("*.json"))) == 1

    code, out, err = run(monkeypatch, "auth", "status", "--json", "--config", config)
    assert code == ExitCode.OK, err
    (server,) = json.loads(out)["servers"]
    assert (server["server"], server["state"]) == ("web", "signed_in")
    (credential,) = server["credentials"]
    assert (credential["issuer"], credential["resource"]) == (world.issuer, world.mcp_url)
    assert (credential["has_refresh_token"], credential["client_source"]) == (True, "dynamic")
    assert not any(secret in out + err for secret in SECRETS)

    code, out, err = run(monkeypatch, "status", "--json", "--config", config)
    assert code == ExitCode.OK, err
    (status,) = json.loads(out)["servers"]
    assert (status["name"], status["state"], status["tool_count"]) == ("web", "ready", 1)
    assert status["auth"]["state"] == "signed_in"
    assert not any(secret in out + err for secret in SECRETS)

    code, out, err = run(monkeypatch, "logout", "web", "--config", config)
    assert (code, out) == (
        ExitCode.OK,
        "signed out of 'web': its stored credentials were deleted\n",
    )
    assert list(credentials_home.glob("*.json")) == []
    code, out, _ = run(monkeypatch, "status", "--json", "--config", config)
    assert code == ExitCode.UNAVAILABLE
    (status,) = json.loads(out)["servers"]
    assert (status["state"], status["hint"]) == ("needs_auth", "trio-mcp login web")


def test_no_browser_takes_the_redirect_url_on_stdin(
    world: FakeOAuthServer,
    tmp_path: Path,
    credentials_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    browser = Browser()
    monkeypatch.setattr("webbrowser.open", browser)
    config = write_config(tmp_path, world.mcp_url)
    code, out, err = run(monkeypatch, "login", "web", "--no-browser", "--config", config)
    assert code == ExitCode.OK, err
    assert browser.opened == []
    assert "paste here the whole URL the browser ends at" in err
    assert out.startswith("signed in to 'web'")
    assert len(list(credentials_home.glob("*.json"))) == 1


def test_a_redirect_uri_off_this_machine_is_pasted_back(
    world: FakeOAuthServer,
    tmp_path: Path,
    credentials_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened = Opened()
    monkeypatch.setattr("webbrowser.open", opened)
    redirect = "https://app.example/oauth/callback"
    config = write_config(tmp_path, world.mcp_url, redirect_uri=redirect)
    code, out, err = run(monkeypatch, "login", "web", "--config", config)
    assert code == ExitCode.OK, err
    assert len(opened.urls) == 1  # the browser is opened, and the answer pasted
    assert f"(it starts with {redirect}?...)" in err
    assert world.authorizations[0]["redirect_uri"] == redirect
    assert world.registrations[0]["redirect_uris"] == [redirect]
    assert out.startswith("signed in to 'web'")


def test_the_paste_times_out(
    world: FakeOAuthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    never = threading.Event()
    # a redirect page off this machine: the paste is the only way back (no loopback receiver)
    config = write_config(tmp_path, world.mcp_url, redirect_uri="https://app.example/cb")
    try:
        code, _, err = run(
            monkeypatch,
            "login",
            "web",
            "--no-browser",
            "--timeout",
            "0.3",
            "--config",
            config,
            terminal=Terminal(wait=never),
        )
    finally:
        never.set()
    assert code == ExitCode.AUTH_FAILED
    assert "nothing was pasted within 0.3 s (--timeout): run the command again" in err
    assert world.token_requests == []


def test_an_authorization_url_that_is_neither_https_nor_loopback_is_not_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real sign-in never gets that far with such a server (it refuses plain-http
    metadata off loopback), so the command's own check is shown with the fake sign-in."""
    monkeypatch.setattr(oauth_fakes, "ISSUER", "http://as.example")
    opened = Opened()
    monkeypatch.setattr("webbrowser.open", opened)
    oauth = oauth_fakes.FakeOAuth()
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal.stdout)
    monkeypatch.setattr("sys.stderr", terminal.stderr)
    monkeypatch.setattr(
        "sys.stdin", io.StringIO("http://127.0.0.1:9/callback?code=abc&state=st-1\n")
    )
    config = write_config(tmp_path, "https://mcp.example/mcp", redirect_uri="https://a.example/cb")
    code = main(["login", "web", "--config", config], oauth=oauth.factories())
    err = terminal.stderr.getvalue()
    assert code == ExitCode.OK, err
    assert opened.urls == []
    assert "the URL is neither https:// nor on loopback: it is not opened" in err
