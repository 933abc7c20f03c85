"""redact_args: a secret-looking option keeps its name and hides its value, in both spellings
(``--token=X`` and ``--token X``); an option whose *name* is harmless is left alone whatever its
value says; arguments that are secrets by their own shape are hidden wherever they are."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.actors.config._config import redact_args
from trio_mcp.actors.config._redact import looks_secret


def test_the_secret_after_the_flag_is_hidden_not_the_flag() -> None:
    # The example: '--mode=secret' is a harmless option that happens to say "secret".
    assert redact_args(("--mode=secret", "--api-key", "X")) == ["--mode=secret", "--api-key", "***"]


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["--token=abc"], ["--token=***"]),
        (["--token", "abc"], ["--token", "***"]),
        # An empty value hides nothing, and saying that it is empty helps.
        (["--token=", "next"], ["--token=", "next"]),
        (["--token", ""], ["--token", ""]),
        # The option after a secret-looking flag is an option, not its value.
        (["--no-auth", "--verbose"], ["--no-auth", "--verbose"]),
        (["--api-key", "-v"], ["--api-key", "-v"]),
        # A value that starts with '-' is still a value.
        (["--api-key", "-Xk8v2Lq"], ["--api-key", "***"]),
        # A short option says nothing about its value: left as it is...
        (["-k", "value"], ["-k", "value"]),
        # ...unless the value is a secret by its own shape.
        (["-k", "ghp_0123456789abcdefABCDEF0123"], ["-k", "***"]),
        (["-e", "GITHUB_TOKEN=ghs-abc"], ["-e", "GITHUB_TOKEN=***"]),
        (["-e", "GITHUB_TOKEN"], ["-e", "GITHUB_TOKEN"]),
        (["-e", "MODE=secret"], ["-e", "MODE=secret"]),
        (["-H", "Authorization: Bearer abc"], ["-H", "Authorization: ***"]),
        (["--header=X-Api-Key: k1"], ["--header=X-Api-Key: ***"]),
        (["--header", "Accept: text/plain"], ["--header", "Accept: text/plain"]),
        (["Bearer abc.def"], ["Bearer ***"]),
        (["sk-ant-api03-0123456789abcdefghij"], ["***"]),
        (["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln"], ["***"]),
        # URLs, alone or as an option's value.
        (["https://u:pw@h/mcp?key=1"], ["https://u:***@h/mcp?key=***"]),
        (["--url=https://u:pw@h/mcp"], ["--url=https://u:***@h/mcp"]),
        (["--url", "https://h/mcp?token=t"], ["--url", "https://h/mcp?token=***"]),
        # Words that merely mention secrets are not secrets.
        (["my-secret-notes.txt", "secret"], ["my-secret-notes.txt", "secret"]),
        (["--mode", "secret"], ["--mode", "secret"]),
    ],
)
def test_redact_args_cases(args: list[str], shown: list[str]) -> None:
    assert redact_args(args) == shown


# --------------------------------------------------------------------------- the property

SECRET_FLAGS = (
    "--api-key",
    "--token",
    "--password",
    "--client-secret",
    "--auth-token",
    "-p_passwd",
)
_WORD = st.from_regex(r"[a-z0-9./][a-z0-9./_]{0,9}", fullmatch=True)
_FLAG = st.from_regex(r"--?[a-z][a-z0-9-]{0,8}", fullmatch=True).filter(
    lambda f: not looks_secret(f)
)
#: Secret values: recognisable in the output, never option-like.
_SECRET = st.from_regex(r"[A-Za-z0-9_+/=.-]{0,20}", fullmatch=True).map(lambda t: f"S3CR3T{t}")


@dataclass(frozen=True)
class Piece:
    args: tuple[str, ...]
    shown: tuple[str, ...]
    secret: str | None = None


_PIECES = st.one_of(
    _WORD.map(lambda w: Piece((w,), (w,))),
    _FLAG.map(lambda f: Piece((f,), (f,))),
    st.tuples(_FLAG, st.one_of(_WORD, st.just("secret"), st.just("api-key"))).map(
        lambda p: Piece((f"{p[0]}={p[1]}",), (f"{p[0]}={p[1]}",))
    ),
    st.tuples(st.sampled_from(SECRET_FLAGS), _SECRET).map(
        lambda p: Piece((p[0], p[1]), (p[0], "***"), p[1])
    ),
    st.tuples(st.sampled_from(SECRET_FLAGS), _SECRET).map(
        lambda p: Piece((f"{p[0]}={p[1]}",), (f"{p[0]}=***",), p[1])
    ),
)


@given(st.lists(_PIECES, max_size=8))
def test_each_secret_is_hidden_and_nothing_else_changes(pieces: list[Piece]) -> None:
    args = [arg for piece in pieces for arg in piece.args]
    shown = redact_args(args)
    assert shown == [arg for piece in pieces for arg in piece.shown]
    text = "\0".join(shown)
    assert "S3CR3T" not in text
    # Redacting twice changes nothing more.
    assert redact_args(shown) == shown
