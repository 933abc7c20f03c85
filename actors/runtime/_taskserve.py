"""The client's side of 2025-11-25 tasks as a *receiver*: what it declares in ``initialize``.

A 2025-11-25 client declares a ``tasks`` capability for the requests a server may ask it to run
as tasks (``sampling/createMessage``, ``elicitation/create``) and for ``tasks/list`` /
``tasks/cancel`` sent to it. trio-mcp runs none of the server's requests as tasks: it answers
them directly (a server that sends ``task`` with one gets the ordinary result, which the
specification allows a client that did not declare the capability to do), so it declares the
capability with no entries, which tells a server that the client knows tasks without promising
any of those requests.
"""

from __future__ import annotations

from typing import Any

from ._callbacks import HostCallbacks

__all__ = ["client_tasks_capability"]


def client_tasks_capability(callbacks: HostCallbacks) -> dict[str, Any]:
    """The ``tasks`` entry of the client capabilities in ``initialize`` (2025-11-25) when the
    host allows tasks (``RuntimeConfig.tasks``)."""
    del callbacks  # no request of the server is run as a task (see the module docstring)
    return {}
