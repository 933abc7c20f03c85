"""A server's ``instructions``: what ``initialize`` (the handshake revisions) or
``server/discover`` (2026-07-28) says about how to use the server, screened before the host
sees it.

The text goes through the injection scan that tool descriptions go through
(:func:`~trio_mcp.actors.runtime._toolcheck.scan_text`), under the runtime's
``security_policy`` (``mcpSecurityPolicy``): with ``"block"`` (the default) a text with a finding
is withheld (``text`` is None and ``withheld`` says why), with ``"warn"`` it is kept and the
finding is in ``warnings``. A text over :data:`MAX_INSTRUCTIONS_CHARS` is withheld as too large
to check. Nothing here adds it to a prompt: the agent surface does that, on the host's request
(``AgentSurface.instructions_prompt``).
"""

from __future__ import annotations

from typing import Final

import attrs

from ..config._config import SecurityPolicy
from ._toolcheck import scan_text

__all__ = ["MAX_INSTRUCTIONS_CHARS", "ServerInstructions", "screen_instructions"]

#: The longest instructions text that is scanned (and kept); a longer one is withheld.
MAX_INSTRUCTIONS_CHARS: Final = 100_000


@attrs.frozen(kw_only=True)
class ServerInstructions:
    """A server's instructions as the host gets them: ``text`` (None when withheld), why it was
    withheld (``withheld``), the scan's findings under the ``"warn"`` policy (``warnings``),
    and the length of what the server sent (``chars``)."""

    server: str
    text: str | None
    withheld: str | None = None
    warnings: tuple[str, ...] = ()
    chars: int = 0


def screen_instructions(
    server: str, text: str, *, policy: SecurityPolicy = "block"
) -> ServerInstructions:
    """Scan ``text`` (a server's instructions) as tool descriptions are scanned and decide
    what the host gets. Never raises."""
    size = len(text)
    if size > MAX_INSTRUCTIONS_CHARS:
        return ServerInstructions(
            server=server,
            text=None,
            withheld=f"too large to check ({size:,} characters; the limit is "
            f"{MAX_INSTRUCTIONS_CHARS:,})",
            chars=size,
        )
    finding = scan_text(text, where="instructions")
    if finding is None:
        return ServerInstructions(server=server, text=text, chars=size)
    if policy == "block":
        return ServerInstructions(
            server=server,
            text=None,
            withheld=f"{finding.describe()} (mcpSecurityPolicy is 'block')",
            chars=size,
        )
    return ServerInstructions(server=server, text=text, warnings=(finding.describe(),), chars=size)
