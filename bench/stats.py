"""Numbers: percentiles, medians over repetitions, and the one table with its ratios."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal

import attrs

__all__ = ["Cell", "Row", "format_table", "median", "percentile"]

Better = Literal["higher", "lower"]

#: The columns of the table, in order: the client names of bench.clients.CLIENTS.
COLUMNS: Final = ("trio-mcp", "official", "raw", "raw-single")
#: The ratio columns: trio-mcp / each of these.
RATIOS: Final = ("official", "raw", "raw-single")

#: A cell: a number, ``None`` (not measured, or hung: ``-``) or a word (``n/a``, ``starved``).
Cell = float | str | None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values``, interpolated between closest ranks.

    Raises :class:`ValueError` for an empty sequence."""
    if not values:
        raise ValueError("percentile() of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that are not ``None`` (a repetition that hung is ``None``);
    ``None`` when more than half of them are ``None``."""
    given = list(values)
    known = [v for v in given if v is not None]
    if not known or len(known) * 2 < len(given):
        return None
    return statistics.median(known)


@attrs.frozen(kw_only=True)
class Row:
    """One line of the table: a metric, its unit, which way is better, one value per client
    (``None``: not measured or hung; a word such as ``n/a`` or ``starved``) and an optional
    note."""

    section: str
    metric: str
    unit: str
    better: Better
    values: Mapping[str, Cell]
    note: str = ""

    def ratio(self, other: str) -> float | None:
        mine, theirs = self.values.get("trio-mcp"), self.values.get(other)
        if not isinstance(mine, int | float) or not isinstance(theirs, int | float) or not theirs:
            return None
        return mine / theirs


def _number(value: Cell, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if unit in ("calls/s",) or abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(rows: Sequence[Row], *, markdown: bool = False) -> str:
    """The table: one row per metric, the four clients, then trio-mcp / official, trio-mcp /
    raw and trio-mcp / raw-single. ``better`` says whether a ratio above 1 is good (``higher``)
    or bad."""
    header = [
        "metric",
        "unit",
        "better",
        *COLUMNS,
        *(f"trio-mcp/{other}" for other in RATIOS),
    ]
    lines: list[list[str]] = []
    for row in rows:
        lines.append(
            [
                f"{row.section}: {row.metric}",
                row.unit,
                row.better,
                *(_number(row.values.get(column), row.unit) for column in COLUMNS),
                *(_ratio(row.ratio(other)) for other in RATIOS),
            ]
        )
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(line) + " |" for line in lines]
        return "\n".join(out)
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    numeric = range(3, len(header))

    def fmt(line: list[str]) -> str:
        return "  ".join(
            cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i])
            for i, cell in enumerate(line)
        )

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([fmt(header), rule, *(fmt(line) for line in lines)])
