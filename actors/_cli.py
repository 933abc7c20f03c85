"""The ``trio-mcp`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

import trio

__all__ = ["main"]


def _version() -> str:
    try:
        return version("trio-mcp")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-mcp",
        description="trio-mcp: the MCP client runtime for trio agent hosts.",
    )
    parser.add_argument("--version", action="version", version=f"trio-mcp {_version()}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser(
        "demo",
        help="run the runtime against embedded demo servers (stdio subprocesses, no network)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    levels = (logging.WARNING, logging.INFO, logging.DEBUG)
    logging.basicConfig(
        level=levels[min(args.verbose, 2)], format="  [%(levelname)s %(name)s] %(message)s"
    )
    if args.command == "demo":
        from ._demo import run_demo

        return trio.run(run_demo)
    parser.print_help(sys.stdout)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
