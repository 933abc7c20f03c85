"""``bench.paired``: the confidence interval of its median, and one run end to end.

The bench is never part of the figures the tests assert: the end-to-end run checks what the
driver reports (one ratio per pair, each side's batches), never how fast anything was.
"""

# ruff: noqa: E402  (the bench's modules are imported once load_bench has made them importable)

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_loader import ROOT, load_bench

load_bench()

from bench.paired import median_interval


def test_the_interval_of_ten_values_is_their_second_and_ninth() -> None:
    # P(Binomial(10, 1/2) <= 1) = 11/1024 <= 0.025 < P(<= 2) = 56/1024: ranks 2 and 9.
    assert median_interval([float(v) for v in range(10, 0, -1)]) == (2.0, 9.0)


def test_the_interval_of_a_hundred_values_is_the_textbook_one() -> None:
    # The usual table for n = 100 at 95%: the 40th and the 61st of the ordered values.
    assert median_interval([float(v) for v in range(1, 101)]) == (40.0, 61.0)


def test_too_few_values_for_the_confidence_give_the_whole_range() -> None:
    # With 5 values even ranks 1 and 5 cover the median with probability 1 - 2/32 < 0.95.
    assert median_interval([3.0, 1.0, 2.0, 5.0, 4.0]) == (1.0, 5.0)
    assert median_interval([7.0]) == (7.0, 7.0)


def test_no_values_have_no_interval() -> None:
    with pytest.raises(ValueError, match="no values"):
        median_interval([])


@pytest.mark.skipif(shutil.which("node") is None, reason="the null stdio server needs Node.js")
def test_two_clients_take_turns_and_every_pair_gives_a_ratio(tmp_path: Path) -> None:
    out = tmp_path / "paired.json"
    command = [sys.executable, "-m", "bench.paired", "raw", "raw-single"]
    command += ["--pairs", "3", "--calls", "20", "--json", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("raw / raw-single: legacy, width 1, 3 pairs of 20 calls")
    summary = json.loads(out.read_text())
    assert summary["pairs"] == 3
    assert len(summary["ratios"]) == 3
    walls = {spec: side["walls_us"] for spec, side in summary["sides"].items()}
    assert sorted(walls) == ["raw", "raw-single"]
    assert all(len(batch) == 3 for batch in walls.values())
    assert summary["ratios"] == pytest.approx(
        [single / raw for raw, single in zip(walls["raw"], walls["raw-single"], strict=True)]
    )
    low, high = summary["ratio_ci95"]
    assert low == min(summary["ratios"]) and high == max(summary["ratios"])


def test_a_side_must_name_a_known_client() -> None:
    command = [sys.executable, "-m", "bench.paired", "raw", "fastest"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "fastest: unknown client 'fastest'" in done.stderr
