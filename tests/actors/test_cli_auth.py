"""``trio-mcp login``, ``logout``, ``auth status`` and NEEDS_AUTH in ``status``, driven through
``main()`` with a fake sign-in (the same store across commands, as files would be)."""

from __future__ import annotations

import http.server
import io
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.actors.oauth_fakes import FakeOAuth
from trio_mcp.actors.cli import ExitCode, main


def write_config(tmp_path: Path, url: str = "https://mcp.example/mcp", **oauth: Any) -> str:
    entry: dict[str, Any] = {"url": url, "auth": "oauth", "timeout": 5}
    if oauth:
        entry["oauth"] = oauth
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "web": entry,
                    "plain": {"url": "https://plain.example/mcp"},
                }
            }
        )
    )
    return str(path)


def run(capsys: pytest.CaptureFixture[str], oauth: FakeOAuth, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv), oauth=oauth.factories())
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class Browser:
    """Stands in for ``webbrowser.open``: records the URL and, like a user signing in, sends
    the browser to the redirect URI of the sign-in's request with a code and the state."""

    def __init__(self, oauth: FakeOAuth, *, follow: bool = True) -> None:
        self.oauth = oauth
        self.follow = follow
        self.opened: list[str] = []

    def __call__(self, url: str) -> bool:
        self.opened.append(url)
        if self.follow:
            request = self.oauth.sign_ins["web"].requests[-1]
            answer = httpx.get(f"{request.redirect_uri}?code=abc&state=st-1", timeout=5)
            assert answer.status_code == 200
        return True


def test_login_opens_the_browser_prints_the_url_and_takes_the_loopback_redirect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    oauth = FakeOAuth()
    browser = Browser(oauth)
    monkeypatch.setattr("webbrowser.open", browser)
    config = write_config(tmp_path)
    code, out, err = run(capsys, oauth, "login", "web", "--config", config, "--scope", "files:read")
    assert code == ExitCode.OK, err
    url = "https://as.example/authorize?client_id=c&state=st-1"
    assert browser.opened == [url]
    assert url in err.splitlines()  # alone on its line
    assert out.startswith("signed in to 'web' (issuer https://as.example; scopes: files:read;")
    assert "refresh token: yes" in out
    sign_in = oauth.sign_ins["web"]
    assert sign_in.login_scopes == [["files:read"]]
    (redirect,) = sign_in.redirect_uris
    assert redirect is not None and redirect.startswith("http://127.0.0.1:")
    assert redirect.endswith("/callback")
    assert "token-abc" not in out + err and "refresh-secret" not in out + err
    assert sign_in.running is False  # the sign-in actor ran for the command only


def test_no_browser_reads_the_pasted_redirect_and_opens_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    oauth = FakeOAuth()
    browser = Browser(oauth, follow=False)
    monkeypatch.setattr("webbrowser.open", browser)
    monkeypatch.setattr(
        "sys.stdin", io.StringIO("http://127.0.0.1:9/callback?code=abc&state=st-1\n")
    )
    config = write_config(tmp_path)
    code, _, err = run(capsys, oauth, "login", "web", "--no-browser", "--config", config)
    assert code == ExitCode.OK, err
    assert browser.opened == []
    assert "https://as.example/authorize?client_id=c&state=st-1" in err
    assert "paste here the whole URL" in err
    assert oauth.sign_ins["web"].token == "token-abc"


def test_no_browser_without_a_terminal_or_anything_piped_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, _, err = run(
        capsys, FakeOAuth(), "login", "web", "--no-browser", "--config", write_config(tmp_path)
    )
    assert code == ExitCode.USAGE
    assert "not a terminal and had nothing piped in" in err
    assert "echo URL | trio-mcp login web --no-browser" in err


def test_a_refused_sign_in_is_exit_code_7(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("http://127.0.0.1:9/callback?code=x&state=bad\n"))
    code, out, _ = run(
        capsys,
        FakeOAuth(),
        "login",
        "web",
        "--no-browser",
        "--json",
        "--config",
        write_config(tmp_path),
    )
    assert code == ExitCode.AUTH_FAILED
    assert json.loads(out) == {
        "error": {
            "kind": "auth",
            "message": "server 'web': the redirect did not carry the state that was sent",
            "type": "OAuthFlowError",
        }
    }


def test_device_login_prints_the_uri_and_the_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    oauth = FakeOAuth()
    code, out, err = run(
        capsys, oauth, "login", "web", "--device", "--config", write_config(tmp_path)
    )
    assert code == ExitCode.OK, err
    assert (
        "to sign in to 'web', open https://as.example/device on any device and enter the code: "
        "WDJB-MJHT"
    ) in err
    assert "signed in to 'web'" in out


def test_login_of_a_server_without_oauth_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, FakeOAuth(), "login", "plain", "--config", write_config(tmp_path))
    assert code == ExitCode.USAGE
    assert "server 'plain' does not sign in with OAuth" in err


def test_logout_and_auth_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    oauth = FakeOAuth()
    config = write_config(tmp_path)
    code, out, _ = run(capsys, oauth, "auth", "status", "--json", "--config", config)
    assert code == ExitCode.OK
    assert json.loads(out) == {
        "servers": [{"server": "web", "state": "signed_out", "credentials": []}]
    }
    monkeypatch.setattr("webbrowser.open", Browser(oauth))
    assert run(capsys, oauth, "login", "web", "--config", config)[0] == ExitCode.OK
    code, out, _ = run(capsys, oauth, "auth", "status", "--json", "--config", config)
    assert json.loads(out) == {
        "servers": [
            {
                "server": "web",
                "state": "signed_in",
                "credentials": [
                    {
                        "issuer": "https://as.example",
                        "resource": "https://mcp.example/mcp",
                        "scopes": ["files:read"],
                        "expires_at": 2_000_000_000.0,
                        "expired": False,
                        "has_refresh_token": True,
                        "client_source": None,
                    }
                ],
            }
        ]
    }
    code, out, _ = run(capsys, oauth, "auth", "status", "--config", config)
    assert code == ExitCode.OK
    assert "web  signed_in  https://as.example  files:read  2033-05-18 03:33:20 UTC  yes" in out
    assert "token-abc" not in out and "refresh-secret" not in out
    code, out, _ = run(capsys, oauth, "logout", "web", "--config", config)
    assert (code, out) == (
        ExitCode.OK,
        "signed out of 'web': its stored credentials were deleted\n",
    )
    code, out, _ = run(capsys, oauth, "logout", "web", "--config", config)
    assert (code, out) == (ExitCode.OK, "'web' had no stored credentials\n")


class _Refusing(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="mcp"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_status_shows_needs_auth_with_the_command_that_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps({"mcpServers": {"web": {"url": url, "auth": "oauth"}}}))
        code, out, _ = run(capsys, FakeOAuth(), "status", "--config", str(path))
        assert code == ExitCode.UNAVAILABLE
        assert "needs_auth" in out
        assert out.rstrip().endswith(
            "web: AuthorizationRequired: server 'web': nobody is signed in; to sign in, run: "
            "trio-mcp login web"
        )
        code, out, _ = run(capsys, FakeOAuth(), "status", "--json", "--config", str(path))
        (status,) = json.loads(out)["servers"]
        assert (status["state"], status["hint"]) == ("needs_auth", "trio-mcp login web")
        assert status["auth"]["state"] == "signed_out"
    finally:
        server.shutdown()
        server.server_close()
