"""``python -m bench.compare``: the same scenarios for two or more source trees, interleaved.

    python -m bench.compare [--rounds 5] [--only SCENARIO,...] [--clients trio-mcp]
                            [--reference raw,raw-single] [--plan JSON | --quick]
                            [--repo DIR] [--server node|python] [--json FILE] [--keep DIR]
                            TREE TREE [TREE ...]

A TREE is ``[LABEL=]SOURCE``. SOURCE is a directory (a checkout, whose package folders are found
from its ``pyproject.toml``, by default ``protocol/``, ``transports/`` and ``actors/``; or a
folder that holds ``trio_mcp/`` already) or a git revision of ``--repo`` (default: the
repository this ``bench/`` is in): ``HEAD~3``, a branch, a commit.

Each tree is copied once, at the start, into a temporary folder laid out as
``trio_mcp/{protocol,transports,actors}`` (a directory is copied too, so that edits made to it
while the comparison runs do not leak into later rounds), compiled, and checked: with
``PYTHONPATH`` on the copy, every ``trio_mcp`` module a ``import trio_mcp.actors`` loads must
come from the copy. Then, round after round, every scenario runs once per tree, each in a fresh
``bench.worker`` interpreter with ``PYTHONPATH`` on that tree's copy; the order of the trees
turns by one every round, so that neither a change in the machine's load nor going first favours
one tree. The bench code itself (clients, scenarios, servers) is always this checkout's; it uses
trio-mcp's public API only, so trees with a different internal layout can be compared (the
``registry`` scenario is the exception: it imports internals).

``--reference`` clients (``raw``, ``raw-single``, ``official``: they do not import trio-mcp) run
once per scenario and round, as a gauge of the machine's load and a floor to compare with.

It prints, for every measured value, the median over the rounds per tree (and its spread,
(max - min) / median), and the ratio of each tree's median to the first tree's.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from .clients import CLIENTS
from .run import ROOT, ROWS, machine_description, run_worker
from .scenarios import Plan
from .worker import SCENARIOS, select, supports

__all__ = ["Tree", "lay_out", "main", "prepare"]

#: The package folders of a checkout whose pyproject.toml does not say otherwise.
DEFAULT_PACKAGE_DIRS: Final = {
    "trio_mcp.protocol": "protocol",
    "trio_mcp.transports": "transports",
    "trio_mcp.actors": "actors",
}
#: What the clients use; a tree without these cannot be measured.
PUBLIC_NAMES: Final = ("open_runtime", "RuntimeConfig", "ServerConfig")
_IGNORE: Final = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")


@attrs.frozen(kw_only=True)
class Tree:
    """A source tree ready to measure: ``path`` goes on ``PYTHONPATH``."""

    label: str
    source: str
    commit: str | None
    path: Path

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.path)
        return env


def _package_dirs(checkout: Path) -> dict[str, str]:
    """Package -> folder (relative to ``checkout``) from ``[tool.setuptools.package-dir]`` of
    the checkout's pyproject.toml, keeping only ``trio_mcp`` packages and the root mapping
    (``""``); the default three folders when it says nothing."""
    pyproject = checkout / "pyproject.toml"
    if not pyproject.is_file():
        return dict(DEFAULT_PACKAGE_DIRS)
    with pyproject.open("rb") as f:
        data = tomllib.load(f)
    mapping = data.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    wanted = {
        package: folder
        for package, folder in mapping.items()
        if package == "" or package == "trio_mcp" or package.startswith("trio_mcp.")
    }
    return wanted or dict(DEFAULT_PACKAGE_DIRS)


def lay_out(checkout: Path, dest: Path) -> None:
    """Copy a checkout's packages into ``dest/trio_mcp/...``: a folder that, on ``PYTHONPATH``,
    is imported as ``trio_mcp``. Subpackages come along with their parent's folder. Raises
    :class:`SystemExit` when a package folder is missing."""
    if (checkout / "trio_mcp").is_dir() and not (checkout / "actors").is_dir():
        shutil.copytree(checkout / "trio_mcp", dest / "trio_mcp", ignore=_IGNORE)
        return
    mapping = _package_dirs(checkout)
    # Parents before children, so a subpackage mapped to a folder of its own lands inside.
    for package in sorted(mapping, key=lambda name: (name.count("."), name)):
        folder = checkout / mapping[package]
        if package == "":
            folder = folder / "trio_mcp"
            target = dest / "trio_mcp"
        else:
            target = dest / Path(*package.split("."))
        if not folder.is_dir():
            raise SystemExit(f"{checkout}: no folder {folder} for package {package or 'trio_mcp'}")
        shutil.copytree(folder, target, ignore=_IGNORE, dirs_exist_ok=True)


def _git(repo: Path, *args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} in {repo}: {done.stderr.decode().strip()}")
    return done.stdout


_CHECK: Final = """
import sys
import trio_mcp.actors as actors
root = sys.argv[1]
outside = sorted(
    f"{name} ({module.__file__})"
    for name, module in sys.modules.items()
    if name.split(".")[0] == "trio_mcp"
    and getattr(module, "__file__", None)
    and not module.__file__.startswith(root)
)
missing = [name for name in sys.argv[2:] if not hasattr(actors, name)]
if outside or missing:
    sys.exit(f"modules from outside the copy: {outside}; missing public names: {missing}")
print(actors.__file__)
"""


def prepare(spec: str, repo: Path, workdir: Path, index: int) -> Tree:
    """Copy the tree ``spec`` (``[LABEL=]SOURCE``) into ``workdir`` and check it imports from
    the copy. Raises :class:`SystemExit` with the reason when it cannot be used."""
    label, equals, source = spec.partition("=")
    if not equals:
        label = source = spec
    dest = workdir / f"tree{index}"
    commit: str | None = None
    if Path(source).is_dir():
        lay_out(Path(source).resolve(), dest)
    else:
        found = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{source}^{{commit}}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if found.returncode != 0:
            raise SystemExit(
                f"tree {label}: {source!r} is neither a directory nor a commit of {repo}"
            )
        commit = found.stdout.strip()
        checkout = workdir / f"tree{index}-checkout"
        checkout.mkdir()
        archive = _git(repo, "archive", "--format=tar", commit)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(checkout, filter="data")
        lay_out(checkout, dest)
        shutil.rmtree(checkout)
    tree = Tree(label=label, source=source, commit=commit, path=dest)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(dest)], check=True, capture_output=True
    )
    done = subprocess.run(
        [sys.executable, "-c", _CHECK, str(dest), *PUBLIC_NAMES],
        env=tree.env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"tree {label} ({source}) cannot be measured: {done.stderr.strip()}")
    return tree


# --------------------------------------------------------------------------- numbers

Rounds = list[dict[str, Any]]


def _numeric_keys(rounds: Sequence[Rounds]) -> list[str]:
    keys: dict[str, None] = {}
    for results in rounds:
        for result in results:
            for key, value in result.items():
                if key not in ("n/a", "flood_over") and isinstance(value, int | float | str):
                    if isinstance(value, str) and key == "timeout_error":
                        continue
                    keys.setdefault(key, None)
    return list(keys)


def summarise(values: Sequence[Any]) -> tuple[float | None, str]:
    """The median of the numbers among ``values`` and a text: the median and the spread,
    plus how many were words (``starved``) or missing."""
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    words = [v for v in values if isinstance(v, str)]
    missing = len(values) - len(numbers) - len(words)
    if not numbers:
        if words:
            return None, f"{words[0]} ({len(words)}/{len(values)})"
        return None, "-"
    middle = statistics.median(numbers)
    spread = (max(numbers) - min(numbers)) / middle * 100 if middle else 0.0
    text = f"{_fmt(middle)} ±{spread / 2:.0f}%"
    if words:
        text += f" ({len(words)} {words[0]})"
    if missing:
        text += f" ({missing} failed)"
    return middle, text


def _fmt(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:#.3g}"


def _label(scenario: str, key: str) -> tuple[str, str]:
    """The table's name for a value, and which way is better (``""`` when not a row)."""
    for spec in ROWS:
        if spec.scenario == scenario and spec.key == key:
            return f"{spec.metric} ({spec.unit})", spec.better
    return f"{scenario}: {key}", ""


def report(
    trees: Sequence[Tree],
    references: Sequence[str],
    results: Mapping[str, Mapping[str, Mapping[str, Rounds]]],
    scenarios: Sequence[str],
    clients: Sequence[str],
) -> str:
    """One table per client: a line per measured value; a column per tree (median ±half the
    spread over the rounds), per reference client, and per ratio to the first tree."""
    lines: list[list[str]] = []
    header = [
        "value",
        "better",
        *(tree.label for tree in trees),
        *references,
        *(f"{tree.label}/{trees[0].label}" for tree in trees[1:]),
    ]
    for client in clients:
        for scenario in scenarios:
            per_tree = [results[tree.label][scenario].get(client, []) for tree in trees]
            per_reference = [results[name][scenario].get(name, []) for name in references]
            for key in _numeric_keys([*per_tree, *per_reference]):
                metric, better = _label(scenario, key)
                medians, cells = [], []
                for rounds in per_tree:
                    middle, text = summarise([r.get(key) for r in rounds])
                    medians.append(middle)
                    cells.append(text)
                ref_cells = [summarise([r.get(key) for r in rounds])[1] for rounds in per_reference]
                ratios = [
                    "-" if m is None or medians[0] in (None, 0) else f"{m / medians[0]:.3f}"
                    for m in medians[1:]
                ]
                name = metric if len(clients) == 1 else f"{client}: {metric}"
                lines.append([name, better, *cells, *ref_cells, *ratios])
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]

    def fmt(line: list[str]) -> str:
        return "  ".join(
            cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i]) for i, cell in enumerate(line)
        )

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([fmt(header), rule, *(fmt(line) for line in lines)])


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("trees", nargs="+", metavar="TREE", help="[LABEL=]DIRECTORY or REVISION")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--only",
        default="sequential_one_cpu,in_flight_32",
        help="comma-separated scenarios or shell patterns (default: %(default)s): "
        f"{', '.join(SCENARIOS)}",
    )
    parser.add_argument(
        "--clients", default="trio-mcp", help="clients measured per tree (default: %(default)s)"
    )
    parser.add_argument(
        "--reference",
        default="",
        help="clients measured once per round, not per tree (raw, raw-single, official)",
    )
    parser.add_argument(
        "--plan",
        default='{"reps": 3}',
        help="the plan as JSON, fields of bench.scenarios.Plan (default: %(default)s)",
    )
    parser.add_argument("--quick", action="store_true", help="the quick plan (overrides --plan)")
    parser.add_argument("--repo", default=str(ROOT), help="the git repository of REVISION trees")
    parser.add_argument("--server", choices=("node", "python"), default="node")
    parser.add_argument("--json", help="also write every round's results here")
    parser.add_argument("--keep", help="lay the copies out here and keep them (default: a temp)")
    args = parser.parse_args(argv)

    if len(args.trees) < 2:
        parser.error("give two trees or more")
    scenarios, unknown = select(args.only)
    if unknown:
        parser.error(
            f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}"
        )
    clients = [c for c in args.clients.split(",") if c]
    references = [c for c in args.reference.split(",") if c]
    if any(c not in CLIENTS for c in [*clients, *references]):
        parser.error(f"clients are {', '.join(CLIENTS)}")
    if "trio-mcp" in references:
        parser.error("trio-mcp depends on the tree: give it in --clients")
    plan = Plan.quick() if args.quick else Plan(**json.loads(args.plan))

    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-compare-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        trees = [prepare(spec, Path(args.repo), workdir, i) for i, spec in enumerate(args.trees)]
        labels = [tree.label for tree in trees]
        if len(set(labels)) != len(labels) or set(labels) & set(references):
            raise SystemExit(
                f"the tree labels must differ from each other and the clients: {labels}"
            )
        for tree in trees:
            at = f" at {tree.commit[:12]}" if tree.commit else ""
            print(f"tree {tree.label}: {tree.source}{at} -> {tree.path}", file=sys.stderr)
        _run_rounds(trees, references, scenarios, clients, plan, args)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _run_rounds(
    trees: Sequence[Tree],
    references: Sequence[str],
    scenarios: Sequence[str],
    clients: Sequence[str],
    plan: Plan,
    args: argparse.Namespace,
) -> dict[str, dict[str, dict[str, Rounds]]]:
    """label (a tree's, or a reference client's) -> scenario -> client -> one result a round;
    prints the table at the end."""
    machine = machine_description()
    print(
        f"machine: {machine['cores']} cores, {machine['cpu']}, Python {machine['python']}, "
        f"Node {machine['node']}; load average {machine['load_average'][0]:.2f}",
        file=sys.stderr,
    )
    results: dict[str, dict[str, dict[str, Rounds]]] = {
        label: {scenario: {} for scenario in scenarios}
        for label in [*(tree.label for tree in trees), *references]
    }
    started = time.perf_counter()
    loads = [os.getloadavg()[0]]
    for round_ in range(args.rounds):
        turn = round_ % len(trees)
        order = [*trees[turn:], *trees[:turn]]
        print(
            f"round {round_ + 1}/{args.rounds} ({', '.join(t.label for t in order)}), "
            f"load average {os.getloadavg()[0]:.2f}",
            file=sys.stderr,
        )
        for scenario in scenarios:
            for client in clients:
                if not supports(scenario, client):
                    continue
                for tree in order:
                    result = _timed(scenario, client, tree.label, plan, args.server, tree.env())
                    results[tree.label][scenario].setdefault(client, []).append(result)
            for name in references:
                if supports(scenario, name):
                    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                    result = _timed(scenario, name, "", plan, args.server, env)
                    results[name][scenario].setdefault(name, []).append(result)
        loads.append(os.getloadavg()[0])
    elapsed = time.perf_counter() - started
    print()
    print(report(trees, references, results, scenarios, clients))
    print()
    print(
        f"{args.rounds} rounds in {elapsed:.0f} s; load average (1 min) at the start of each "
        f"round and at the end: {', '.join(f'{load:.2f}' for load in loads)}; "
        "±: half the spread (max - min) over the rounds, of the median"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "machine": machine,
                    "load_averages": loads,
                    "plan": attrs.asdict(plan),
                    "server": args.server,
                    "trees": [
                        {"label": t.label, "source": t.source, "commit": t.commit} for t in trees
                    ],
                    "references": list(references),
                    "results": results,
                },
                indent=2,
            )
            + "\n"
        )
    return results


def _timed(
    scenario: str, client: str, label: str, plan: Plan, server: str, env: Mapping[str, str]
) -> dict[str, Any]:
    started = time.perf_counter()
    what = f"{client} @ {label}" if label else client
    print(f"  {scenario:<22} {what:<28}", end="", file=sys.stderr, flush=True)
    result = run_worker(scenario, client, plan, server, env=env)
    print(f" {time.perf_counter() - started:5.1f} s", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
