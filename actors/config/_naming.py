"""The naming rule of registered tools, as far as configuration needs it.

Tools are offered to the model as ``mcp_{server}_{tool}`` with every character outside
``[A-Za-z0-9_]`` replaced by ``_``, and a name over 64 characters (or with non-ASCII characters)
cut to its first 55 and given a hash suffix (:func:`trio_mcp.actors.runtime.registered_name`
builds them). Two tools that map to one name are both refused, so the loader has to know which
*servers* could ever produce the same name: :func:`server_names_may_clash`.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "MAX_NAME_LENGTH",
    "NAME_HEAD",
    "UNSAFE_NAME_CHARACTERS",
    "sanitise_name",
    "server_names_may_clash",
    "tool_name_stem",
]

#: The longest registered name.
MAX_NAME_LENGTH: Final = 64
#: A name cut for length keeps this many characters, then ``_`` and 8 hex digits of a hash.
NAME_HEAD: Final = 55
#: What a registered name may not contain (replaced by ``_``).
UNSAFE_NAME_CHARACTERS: Final = re.compile(r"[^A-Za-z0-9_]")


def sanitise_name(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_]`` replaced by ``_``."""
    return UNSAFE_NAME_CHARACTERS.sub("_", text)


def tool_name_stem(server: str, *, prefix: str = "mcp") -> str:
    """How every registered name of ``server``'s tools starts, whatever the tool: the
    sanitised ``mcp_{server}_``, cut to the :data:`NAME_HEAD` characters a long name keeps."""
    return sanitise_name(f"{prefix}_{server}_")[:NAME_HEAD]


def server_names_may_clash(first: str, second: str) -> bool:
    """Whether a tool of server ``first`` and a tool of server ``second`` can be registered
    under the same name: exactly when one stem (:func:`tool_name_stem`) starts the other.
    ``git.hub`` and ``git_hub`` can (their stems are equal); so can ``git`` and ``git_hub``
    (``git``'s tool ``hub_x`` and ``git_hub``'s tool ``x`` are both ``mcp_git_hub_x``); ``git``
    and ``gitlab`` cannot."""
    a, b = tool_name_stem(first), tool_name_stem(second)
    return a.startswith(b) or b.startswith(a)
