"""A host's roots, sampling and elicitation callbacks that record what they were asked.

The same objects answer a legacy server's requests (through the dispatcher) and a 2026-07-28
server's input requests (through the MRTR loop): the host writes one callback per capability.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs
import trio

from trio_mcp.actors.runtime._callbacks import HostCallbacks
from trio_mcp.protocol._types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    Root,
    TextContent,
)

__all__ = ["RecordingHost"]


@attrs.define(eq=False)
class RecordingHost:
    """Answers every request, recording ``(callback, server, params)`` in :attr:`asked`.

    Roots: one root named after the server. Sampling: "echo: <text of the last message>".
    Elicitation: :attr:`elicit_action`; an accepted form echoes the message back as content.
    Each callback takes :attr:`delay` seconds (after recording the question); :attr:`answered`
    counts the answers given.
    """

    asked: list[tuple[str, str, Any]] = attrs.Factory(list)
    elicit_action: Literal["accept", "decline", "cancel"] = "accept"
    delay: float = 0.0
    answered: int = 0

    async def _think(self) -> None:
        if self.delay:
            await trio.sleep(self.delay)
        else:
            await trio.lowlevel.checkpoint()
        self.answered += 1

    async def list_roots(self, server: str) -> list[Root]:
        self.asked.append(("roots", server, None))
        await self._think()
        return [Root(uri="file:///work", name=server)]

    async def sampling(
        self, server: str, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        self.asked.append(("sampling", server, params))
        await self._think()
        last = params.messages[-1].content
        text = last.text if isinstance(last, TextContent) else "?"
        return CreateMessageResult(
            role="assistant",
            content=TextContent(text=f"echo: {text}"),
            model="host-model",
            stop_reason="endTurn",
        )

    async def elicitation(
        self, server: str, params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> ElicitResult:
        self.asked.append(("elicitation", server, params))
        await self._think()
        if self.elicit_action != "accept":
            return ElicitResult(action=self.elicit_action)
        return ElicitResult(action="accept", content={"message": params.message})

    def callbacks(
        self,
        *,
        roots: bool = True,
        sampling: bool = True,
        elicitation: bool = True,
        modes: tuple[str, ...] = ("form",),
    ) -> HostCallbacks:
        """The host's :class:`HostCallbacks`, leaving out the capabilities set to False."""
        return HostCallbacks(
            list_roots=self.list_roots if roots else None,
            sampling=self.sampling if sampling else None,
            elicitation=self.elicitation if elicitation else None,
            elicitation_modes=modes,
        )
