"""``bench.hops`` runs end to end: both hops measured, each line saying what it measured.

Like every test of the bench, it checks what the tool reports, never how fast anything was.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from tests.bench_loader import ROOT

LINE = re.compile(
    r"  through a (table|writer) task: [+-]\d+\.\d\d us/call "
    r"\(95% CI [+-]\d+\.\d\d to [+-]\d+\.\d\d\), on \d+\.\d us/call without"
)


@pytest.mark.skipif(shutil.which("node") is None, reason="the null stdio server needs Node.js")
def test_each_hop_gets_a_line_with_its_interval() -> None:
    command = [sys.executable, "-m", "bench.hops", "--pairs", "2", "--calls", "10"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "2 pairs of 10 calls, unpinned"
    matches = [LINE.fullmatch(line) for line in lines[1:]]
    assert [m.group(1) if m else line for m, line in zip(matches, lines[1:], strict=True)] == [
        "table",
        "writer",
    ]


def test_cpus_must_name_two_cpus() -> None:
    command = [sys.executable, "-m", "bench.hops", "--cpus", "1"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--cpus '1': say C,S, two CPU numbers" in done.stderr
