"""``python -m bench``: run the benchmarks and print the table (see bench/README.md)."""

from __future__ import annotations

from .run import main

if __name__ == "__main__":
    main()
