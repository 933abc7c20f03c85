"""A minimal host for the "host is SIGKILLed" test of the stdio transport.

It opens a stdio transport to ``stdio_peer.py``, asks the peer to start a grandchild, prints one
line ``<server pid> <process group> <grandchild pid>`` and then sleeps until it is killed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from trio_mcp.transports.stdio._stdio import StdioParameters, open_stdio_transport

PEER = Path(__file__).with_name("stdio_peer.py")


async def main() -> None:
    params = StdioParameters(command=sys.executable, args=(str(PEER),))
    async with open_stdio_transport(params) as transport:
        await transport.send(b'{"peer":"spawn"}')
        grandchild = json.loads(await transport.receive())["pid"]
        print(transport.pid, transport.pgid, grandchild, flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main)
