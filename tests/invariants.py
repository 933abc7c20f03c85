"""Invariants of the runtime, checked while it runs.

:class:`ToolsOnlyWhenReady` is a trio Instrument that, after every task step, compares what the
registry published (``rt.tools()``) with what the supervisors published (``rt.status()``): no tool
of a server that is not READY may be in any published view, every tool in it is of its server's
current connection generation (nothing of an older connection stays, or comes back), and the
view's version never goes down. Install it with ``trio.lowlevel.add_instrument`` for the life of
a runtime; it records each violation (and the task step after which it was seen) instead of
raising inside the scheduler.
"""

from __future__ import annotations

import trio

from trio_mcp.actors import Runtime, ServerState


class ToolsOnlyWhenReady(trio.abc.Instrument):
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.violations: list[str] = []
        self.checks = 0
        self.version = runtime.tools_version

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self.check(task.name)

    def check(self, after: str = "") -> None:
        self.checks += 1
        runtime = self.runtime
        version = runtime.tools_version
        if version < self.version:
            self.violations.append(
                f"the view's version went from {self.version} to {version} (after a step of "
                f"{after})"
            )
        self.version = max(self.version, version)
        tools = runtime.tools()
        if not tools:
            return
        statuses = {name: s.status() for name, s in runtime._supervisors.items()}
        for name, tool in tools.items():
            status = statuses.get(tool.server)
            state = status.state if status is not None else None
            if status is None or state is not ServerState.READY:
                self.violations.append(
                    f"{name} of server {tool.server!r} is registered while the server is "
                    f"{state} (after a step of {after})"
                )
            elif tool.generation != status.generation:
                self.violations.append(
                    f"{name} of server {tool.server!r} is of generation {tool.generation}, "
                    f"but the server is READY on generation {status.generation} (after a step "
                    f"of {after})"
                )
