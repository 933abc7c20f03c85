"""How an MCP tool is named for the model.

``mcp_{server}_{tool}``; every character outside ``[A-Za-z0-9_]`` becomes ``_``. A name longer than
64 characters, or one whose server or tool name has non-ASCII characters, becomes its first 55
characters, ``_``, and the first 8 hex digits of ``sha256(server + "\\0" + tool)``: the same on
every run, and different for tools that only differ in the characters that were replaced.

The character rule and the lengths are :mod:`trio_mcp.actors.config._naming`'s: the loader
needs them too, to keep a project file from adding a server whose tool names could clash with
a user server's.
"""

from __future__ import annotations

import hashlib

from ..config._naming import MAX_NAME_LENGTH
from ..config._naming import NAME_HEAD as _HEAD
from ..config._naming import UNSAFE_NAME_CHARACTERS as _UNSAFE

__all__ = [
    "MAX_NAME_LENGTH",
    "registered_name",
    "tool_name_prefix",
]


def registered_name(server: str, tool: str, *, prefix: str = "mcp") -> str:
    """The name under which ``tool`` of ``server`` is offered to the model. Never fails."""
    plain = f"{prefix}_{server}_{tool}"
    if plain.isascii():  # then so are server and tool
        if not plain.isidentifier():  # else there is nothing to replace
            plain = _UNSAFE.sub("_", plain)
        if len(plain) <= MAX_NAME_LENGTH:
            return plain
    else:
        plain = _UNSAFE.sub("_", plain)
        if len(plain) <= MAX_NAME_LENGTH and (server + tool).isascii():  # a non-ASCII prefix
            return plain
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{plain[:_HEAD]}_{digest}"


def tool_name_prefix(server: str, *, prefix: str = "mcp") -> str:
    """The start of every registered name of ``server``'s tools (``mcp_my_server_``)."""
    return _UNSAFE.sub("_", f"{prefix}_{server}_")
