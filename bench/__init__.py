"""trio-mcp's benchmarks: ``make bench`` (or ``python -m bench``). See bench/README.md."""
