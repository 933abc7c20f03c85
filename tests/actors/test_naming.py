from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.actors.config._config import valid_server_name
from trio_mcp.actors.runtime._naming import registered_name


def test_plain_names_are_prefixed_and_sanitized() -> None:
    assert registered_name("github", "create_issue") == "mcp_github_create_issue"
    assert registered_name("my-server", "get.file") == "mcp_my_server_get_file"
    assert registered_name("a", "b c/d") == "mcp_a_b_c_d"


def test_a_64_character_name_is_kept() -> None:
    tool = "t" * (64 - len("mcp_s_"))
    assert registered_name("s", tool) == f"mcp_s_{tool}"


def test_a_long_name_is_cut_and_hashed_stably() -> None:
    tool = "x" * 70
    digest = hashlib.sha256(b"srv\0" + tool.encode()).hexdigest()[:8]
    name = registered_name("srv", tool)
    assert name == ("mcp_srv_" + "x" * 47) + "_" + digest
    assert len(name) == 64
    assert registered_name("srv", tool) == name


def test_a_non_ascii_name_is_hashed_even_when_short() -> None:
    digest = hashlib.sha256("s\0café".encode()).hexdigest()[:8]
    assert registered_name("s", "café") == "mcp_s_caf_" + "_" + digest


def test_names_differing_only_in_replaced_characters_collide_when_short() -> None:
    assert registered_name("s", "a-b") == registered_name("s", "a_b") == "mcp_s_a_b"


@pytest.mark.parametrize(
    ("name", "ok"),
    [("github", True), ("my.server-2_x", True), ("", False), ("a b", False), ("ünï", False)],
)
def test_server_names(name: str, ok: bool) -> None:
    assert valid_server_name(name) is ok


def regex_registered_name(server: str, tool: str, *, prefix: str = "mcp") -> str:
    """The name as the first version computed it: a regular expression on every name."""
    plain = re.sub(r"[^A-Za-z0-9_]", "_", f"{prefix}_{server}_{tool}")
    if len(plain) <= 64 and (server + tool).isascii():
        return plain
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{plain[:55]}_{digest}"


# Mostly characters near the ones that matter: letters, digits, "_", "-", ".", " ", non-ASCII
# letters and digits (which str.isidentifier accepts and the name must not keep).
name_text = st.text(alphabet=st.sampled_from("aZ09_-. /éß٣𝟘ﬁ\u200b"), max_size=70) | st.text(
    max_size=70
)


@given(name_text, name_text, st.sampled_from(["mcp", "x", "", "1a", "é"]))
def test_registered_name_is_the_name_the_regular_expression_gives(
    server: str, tool: str, prefix: str
) -> None:
    assert registered_name(server, tool, prefix=prefix) == regex_registered_name(
        server, tool, prefix=prefix
    )


def test_names_that_need_no_replacement_are_kept_as_they_are() -> None:
    assert registered_name("s", "read_file_2") == "mcp_s_read_file_2"
    assert registered_name("s", "if") == "mcp_s_if"  # a keyword is still a plain name
    assert registered_name("9", "x", prefix="") == "_9_x"


def test_a_hostile_name_gives_a_bounded_name() -> None:
    tool = "x" * 10_000_000 + "é"
    name = registered_name("s", tool)
    assert len(name) == 64
    assert name.startswith("mcp_s_xxx")
    assert re.fullmatch(r"[A-Za-z0-9_]+", name)
