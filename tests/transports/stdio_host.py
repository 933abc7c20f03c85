"""A minimal host for the "host is SIGKILLed" tests of the stdio transport.

``stdio_host.py [COUNT]`` opens COUNT (default 1) stdio transports to ``stdio_peer.py`` at once,
asks each peer to start a grandchild, prints one line ``<server pid> <process group>
<grandchild pid>`` per server and then sleeps until it is killed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from trio_mcp.transports.stdio._stdio import StdioParameters, open_stdio_transport

PEER = Path(__file__).with_name("stdio_peer.py")


async def main(count: int) -> None:
    found: list[tuple[int, int, int]] = []
    all_found = trio.Event()

    async def serve() -> None:
        params = StdioParameters(command=sys.executable, args=(str(PEER),))
        async with open_stdio_transport(params) as transport:
            await transport.send(b'{"peer":"spawn"}')
            grandchild = json.loads(await transport.receive())["pid"]
            found.append((transport.pid, transport.pgid, grandchild))
            if len(found) == count:
                all_found.set()
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(serve)
        await all_found.wait()
        for server, group, grandchild in found:
            print(server, group, grandchild, flush=True)


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 1)
