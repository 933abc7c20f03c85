"""The ``trio-mcp`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

__all__ = ["main"]


def _version() -> str:
    try:
        return version("trio-mcp")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-mcp",
        description=(
            "trio-mcp: the MCP client runtime for trio agent hosts. "
            "The commands that talk to servers arrive with the runtime; "
            "this build offers --version and --help."
        ),
    )
    parser.add_argument("--version", action="version", version=f"trio-mcp {_version()}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help(sys.stdout)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
