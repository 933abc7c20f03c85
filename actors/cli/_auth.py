"""``trio-mcp login``, ``logout`` and ``auth status``: OAuth sign-in from the command line.

::

    trio-mcp login NAME [--no-browser] [--device] [--scope S ...]
    trio-mcp logout NAME
    trio-mcp auth status [--json]

``login`` listens for the redirect on 127.0.0.1 (a port the system picks), opens the browser
(never through a shell; only ``https://``, or ``http://`` on loopback) and prints the URL too;
``--no-browser`` prints the URL and reads the URL the browser ended at, pasted on stdin (a
remote shell, a container); ``--device`` uses the device authorization grant (RFC 8628). The
sign-in is built through the same :class:`~trio_mcp.actors.runtime.OAuthFactories` as the
runtime's, and the credentials go to ``RuntimeConfig.credentials_dir``. Nothing printed ever
holds a secret.
"""

from __future__ import annotations

import argparse
import contextvars
import datetime
import sys
import time
import webbrowser
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import trio

from ...protocol._errors import AuthorizationError, ConfigError
from ...transports._tls import is_loopback_host
from ...transports.oauth._loopback import (
    DEFAULT_REDIRECT_PATH,
    LOOPBACK_TIMEOUT,
    open_loopback_receiver,
)
from ...transports.oauth._types import (
    AuthorizationRequest,
    AuthState,
    AuthStatus,
    Credential,
    DeviceAuthorization,
    OAuthSettings,
    SignIn,
    TokenStore,
)
from ..config._config import ServerConfig
from ..config._loader import LoadedConfig, credentials_path
from ..runtime._runtime import _collapse, http_parameters
from ..runtime._signin import DEFAULT_OAUTH, OAuthFactories, open_sign_in
from ._cli import ExitCode, _Exit, _load, _Out, _run, _seconds, _server_named, _usage

__all__ = ["OAUTH_FACTORIES", "add_auth_commands", "auth_status_json"]

#: The sign-in and store the command line uses (``main(oauth=...)`` sets it for one run).
OAUTH_FACTORIES: contextvars.ContextVar[OAuthFactories] = contextvars.ContextVar(
    "trio_mcp_cli_oauth", default=DEFAULT_OAUTH
)


def add_auth_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``login``, ``logout`` and ``auth status`` to the ``trio-mcp`` subparsers."""
    login = commands.add_parser(
        "login",
        parents=[common],
        help="sign in to a server that uses OAuth",
        description="Sign in to an OAuth server: the browser opens on the authorization "
        "server's page (the URL is printed too) and its redirect comes back to 127.0.0.1.",
    )
    login.add_argument("name", metavar="NAME", help="the server")
    login.add_argument(
        "--no-browser",
        action="store_true",
        help="do not open a browser: print the URL, then paste the URL the browser ends at "
        "(for SSH sessions and containers)",
    )
    login.add_argument(
        "--device",
        action="store_true",
        help="sign in with a code on another device (RFC 8628), when the server offers it",
    )
    login.add_argument(
        "--scope",
        action="append",
        metavar="S",
        help="a scope to ask for (repeat it; default: the configured ones, else the server's)",
    )
    login.add_argument(
        "--timeout",
        type=_seconds,
        default=LOOPBACK_TIMEOUT,
        metavar="SECONDS",
        help=f"how long to wait for the sign-in (default {LOOPBACK_TIMEOUT:g})",
    )
    login.set_defaults(handler=_cmd_login)

    logout = commands.add_parser(
        "logout", parents=[common], help="forget a server's stored OAuth credentials"
    )
    logout.add_argument("name", metavar="NAME", help="the server")
    logout.set_defaults(handler=_cmd_logout)

    auth = commands.add_parser("auth", help="OAuth sign-in of the servers")
    auth_commands = auth.add_subparsers(dest="auth_command", metavar="SUBCOMMAND")
    status = auth_commands.add_parser(
        "status",
        parents=[common],
        help="per OAuth server: signed in or not, issuer, scopes, expiry (never a secret)",
    )
    status.set_defaults(handler=_cmd_auth_status)
    auth.set_defaults(handler=lambda _args, _out: _help(auth))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return ExitCode.USAGE


# --------------------------------------------------------------------------- shared


def _oauth_server(loaded: LoadedConfig, name: str) -> tuple[ServerConfig, OAuthSettings]:
    server = _server_named(loaded, name)
    settings = server.oauth_settings
    if settings is None:
        raise _usage(
            f'server {name!r} does not sign in with OAuth: set "auth": "oauth" (or an '
            '"oauth" table) in its configuration'
        )
    return server, settings


def _store(loaded: LoadedConfig) -> TokenStore:
    directory = loaded.config.credentials_dir or credentials_path()
    try:
        return OAUTH_FACTORIES.get().store(directory)
    except ConfigError as exc:
        raise _Exit(ExitCode.CONFIG, str(exc), kind="config") from None


@asynccontextmanager
async def _sign_in(
    loaded: LoadedConfig, server: ServerConfig, settings: OAuthSettings
) -> AsyncIterator[SignIn]:
    store = _store(loaded)
    try:
        opened = open_sign_in(
            OAUTH_FACTORIES.get(),
            server=server.name,
            settings=settings,
            store=store,
            http=http_parameters(server),
        )
        async with opened as sign_in:
            yield sign_in
    except ConfigError as exc:
        raise _Exit(ExitCode.CONFIG, str(exc), kind="config") from None
    except BaseExceptionGroup as group:  # the sign-in's nursery: one failure comes out as itself
        raise _single(group) from None


def _single(group: BaseExceptionGroup[Any]) -> BaseException:
    """The one failure in ``group`` (its cause kept), or the group when there are several."""
    single = _collapse(group)
    if single is not group:
        single.__suppress_context__ = single.__cause__ is None
    return single


def _failed(exc: AuthorizationError) -> _Exit:
    return _Exit(ExitCode.AUTH_FAILED, str(exc), kind="auth", details={"type": type(exc).__name__})


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def auth_status_json(status: AuthStatus | None) -> dict[str, Any] | None:
    """What ``--json`` shows of a sign-in's status (never a secret)."""
    if status is None:
        return None
    return {
        "state": status.state.value,
        "issuer": status.issuer,
        "scopes": list(status.scopes),
        "expires_at": status.expires_at,
        "has_refresh_token": status.has_refresh_token,
        "client_source": status.client_source,
        "reason": status.reason,
        "hint": status.hint,
    }


# --------------------------------------------------------------------------- login


def _browsable(url: str) -> bool:
    """Whether ``url`` may be handed to the browser: ``https://``, or ``http://`` on loopback."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    return bool(host) and (scheme == "https" or (scheme == "http" and is_loopback_host(host)))


def _loopback_target(redirect_uri: str | None) -> tuple[str, int] | None:
    """Where to listen for the redirect: (path, port); port 0 lets the system pick. None: the
    configured redirect URI is not on this machine (the URL is pasted back)."""
    if redirect_uri is None:
        return DEFAULT_REDIRECT_PATH, 0
    parts = urlsplit(redirect_uri)
    if parts.scheme == "http" and parts.hostname == "127.0.0.1" and parts.port:
        return parts.path or "/", parts.port
    return None


def _cmd_login(args: argparse.Namespace, out: _Out) -> int:
    if args.device and args.no_browser:
        raise _usage("--device needs no browser on this machine already: give one of the two")
    loaded = _load(args, out)
    server, settings = _oauth_server(loaded, args.name)
    scopes: Sequence[str] | None = args.scope or None

    async def login() -> int:
        async with _sign_in(loaded, server, settings) as sign_in:
            try:
                if args.device:
                    status = await sign_in.login_device(_show_device(out), scopes=scopes)
                else:
                    status = await _browser_login(sign_in, settings, args, out, scopes)
            except AuthorizationError as exc:
                raise _failed(exc) from None
        if out.json:
            out.document({"server": args.name, "auth": auth_status_json(status)})
        else:
            scope_text = " ".join(status.scopes) or "-"
            refresh = "yes" if status.has_refresh_token else "no"
            out.line(
                f"signed in to {args.name!r} (issuer {status.issuer or '-'}; scopes: "
                f"{scope_text}; expires: {_when(status.expires_at)}; refresh token: {refresh})"
            )
        return ExitCode.OK

    return _run(login)


def _show_device(out: _Out) -> Any:
    async def show(device: DeviceAuthorization) -> None:
        out.note(
            f"to sign in to {device.server!r}, open {device.verification_uri} on any device and "
            f"enter the code: {device.user_code}"
        )
        if device.verification_uri_complete:
            out.note(f"(or open {device.verification_uri_complete})")
        out.note("waiting for the sign-in...")

    return show


async def _browser_login(
    sign_in: SignIn,
    settings: OAuthSettings,
    args: argparse.Namespace,
    out: _Out,
    scopes: Sequence[str] | None,
) -> AuthStatus:
    target = _loopback_target(settings.redirect_uri)
    if target is None:  # a redirect page elsewhere: the user pastes where it ended
        return await sign_in.login(
            _Prompt(out, args, receiver=None), redirect_uri=settings.redirect_uri, scopes=scopes
        )
    path, port = target
    try:
        async with open_loopback_receiver(path=path, port=port, timeout=args.timeout) as receiver:
            return await sign_in.login(
                _Prompt(out, args, receiver=receiver),
                redirect_uri=settings.redirect_uri or receiver.redirect_uri,
                scopes=scopes,
            )
    except BaseExceptionGroup as group:  # the receiver's nursery
        raise _single(group) from None


class _Prompt:
    """Shows the sign-in URL (and opens the browser unless ``--no-browser``); returns the
    redirect that came to the receiver or was pasted on stdin, whichever came first."""

    def __init__(self, out: _Out, args: argparse.Namespace, receiver: Any) -> None:
        self.out = out
        self.args = args
        self.receiver = receiver

    async def __call__(self, request: AuthorizationRequest) -> str:
        out = self.out
        out.note(f"to sign in to {request.server!r}, open this URL in a browser:")
        print(request.url, file=out.stderr, flush=True)  # alone on its line: easy to copy
        paste = self.args.no_browser or self.receiver is None
        if not self.args.no_browser:
            if not _browsable(request.url):
                out.note("the URL is neither https:// nor on loopback: it is not opened")
            elif not await trio.to_thread.run_sync(webbrowser.open, request.url):
                out.note("could not open a browser: open the URL above yourself")
        if not paste:
            out.note("waiting for the browser to come back...")
            result: str = await self.receiver.wait()
            return result
        out.note(
            f"then paste here the whole URL the browser ends at (it starts with "
            f"{request.redirect_uri}?...) and press Enter:"
        )
        if self.receiver is None:
            return await self._pasted()
        winner: list[str] = []
        try:
            async with trio.open_nursery() as nursery:

                async def take(source: Any) -> None:
                    winner.append(await source())
                    nursery.cancel_scope.cancel()

                nursery.start_soon(take, self.receiver.wait)
                nursery.start_soon(take, self._pasted)
        except BaseExceptionGroup as group:
            raise _single(group) from None
        return winner[0]

    async def _pasted(self) -> str:
        stdin = self.out.stdin
        isatty = getattr(stdin, "isatty", None)
        tty = bool(isatty and isatty())
        with trio.move_on_after(self.args.timeout):
            line = await trio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
            text = line.strip()
            if not text:
                if not tty:
                    raise _usage(
                        "--no-browser reads the redirect URL from stdin, which is not a terminal "
                        "and had nothing piped in: run it on a terminal, or pipe the URL in "
                        f"(echo URL | trio-mcp login {self.args.name} --no-browser)"
                    )
                raise _usage("nothing was pasted: run the command again and paste the URL")
            parts = urlsplit(text)
            if not parts.scheme or not parts.netloc or not parts.query:
                raise _usage(
                    "that is not the URL the browser ended at: paste the whole address, "
                    "starting with http:// or https:// and holding ?code=...&state=..."
                )
            return text
        raise AuthorizationError(
            f"nothing was pasted within {self.args.timeout:g} s (--timeout): run the command again"
        )


# --------------------------------------------------------------------------- logout, status


def _cmd_logout(args: argparse.Namespace, out: _Out) -> int:
    loaded = _load(args, out)
    server, settings = _oauth_server(loaded, args.name)

    async def logout() -> int:
        async with _sign_in(loaded, server, settings) as sign_in:
            forgot = await sign_in.logout()
        if out.json:
            out.document({"server": args.name, "deleted": forgot})
        elif forgot:
            out.line(f"signed out of {args.name!r}: its stored credentials were deleted")
        else:
            out.line(f"{args.name!r} had no stored credentials")
        return ExitCode.OK

    return _run(logout)


def _credential_status(name: str, credentials: Sequence[Credential]) -> dict[str, Any]:
    """What ``auth status`` shows of one server (never a secret)."""
    rows = []
    state = AuthState.SIGNED_OUT
    now = time.time()
    for credential in credentials:
        tokens = credential.tokens
        expired = tokens is not None and tokens.expires_at is not None and tokens.expires_at <= now
        usable = tokens is not None and (not expired or tokens.refresh_token is not None)
        if usable:
            state = AuthState.SIGNED_IN
        elif tokens is not None and state is AuthState.SIGNED_OUT:
            state = AuthState.NEEDS_AUTH
        rows.append(
            {
                "issuer": credential.key.issuer,
                "resource": credential.key.resource,
                "scopes": list(tokens.scopes) if tokens is not None else [],
                "expires_at": tokens.expires_at if tokens is not None else None,
                "expired": expired,
                "has_refresh_token": tokens is not None and tokens.refresh_token is not None,
                "client_source": credential.client.source if credential.client else None,
            }
        )
    return {"server": name, "state": state.value, "credentials": rows}


def _cmd_auth_status(args: argparse.Namespace, out: _Out) -> int:
    loaded = _load(args, out)
    servers = [s.name for s in loaded.config.servers if s.oauth_settings is not None]

    async def status() -> int:
        stored = await _store(loaded).list() if servers else ()
        found = [
            _credential_status(
                name, [c for c in stored if c.key.server == name and c.key.tenant == ""]
            )
            for name in servers
        ]
        if out.json:
            out.document({"servers": found})
            return ExitCode.OK
        if not found:
            out.line("no configured server signs in with OAuth")
            return ExitCode.OK
        out.line("SERVER  STATE  ISSUER  SCOPES  EXPIRES  REFRESH TOKEN")
        for item in found:
            if not item["credentials"]:
                out.line(f"{item['server']}  {item['state']}  -  -  -  -")
                out.line(f"  sign in with: trio-mcp login {item['server']}")
            for row in item["credentials"]:
                out.line(
                    f"{item['server']}  {item['state']}  {row['issuer']}  "
                    f"{' '.join(row['scopes']) or '-'}  {_when(row['expires_at'])}"
                    f"{' (expired)' if row['expired'] else ''}  "
                    f"{'yes' if row['has_refresh_token'] else 'no'}"
                )
            if item["state"] == AuthState.NEEDS_AUTH.value:
                out.line(f"  sign in again with: trio-mcp login {item['server']}")
        return ExitCode.OK

    return _run(status)
