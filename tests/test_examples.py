"""The examples run for real: each one in a subprocess, against real stdio server processes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "agent_host.py"

#: The outcome of each scripted tool call of the open_runtime form, in order.
SCRIPTED_OUTCOMES = [
    "ok",
    "ok",
    "ok",
    "ok",
    "not_found",
    "timeout",
    "tool_error",
    "ok",
    "rpc_error",
    "disconnected",
    "ok",
]


def run_example(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )


def test_agent_host_with_open_runtime(tmp_path: Path) -> None:
    done = run_example(cwd=tmp_path)
    out = done.stdout
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{done.stderr}"
    lines = out.splitlines()
    assert lines[-1] == "OK: everything went as expected."
    assert "UNEXPECTED" not in out
    assert "Traceback" not in done.stderr

    # The model is given 9 tools: the filtered-out one is not among them.
    assert "The model is given 9 tools:" in lines
    assert "mcp_weather_internal_reindex" not in out
    # Every scripted call ended as a host must expect, in order.
    kinds = [line[len("  <- [") :].split("]")[0] for line in lines if line.startswith("  <- [")]
    assert kinds == SCRIPTED_OUTCOMES
    assert '  <- [ok] {"body":"milk, eggs","title":"groceries"}' in lines
    assert "    progress 4/4 step 4 of 4" in lines
    assert "  <- [not_found] there is no tool named 'mcp_wether_forecast'" in lines
    assert "  <- [timeout] no answer within 1.5 s" in lines
    assert (
        "  <- [tool_error] the archive is read-only until the nightly backup has finished"
    ) in lines
    assert f"  <- [ok] exported 2 notes to {tmp_path.as_uri()} as markdown" in lines
    assert (
        "  <- [rpc_error] the server refused the call (-32602): JSON-RPC error -32602 from "
        "'desk' to tools/call: ticket 'T-404' does not exist"
    ) in lines
    assert any(
        line.startswith("  <- [disconnected] the server went away; outcome unknown")
        for line in lines
    )
    # The host callbacks answered the server's requests; the server's log came as an event.
    assert f"  [host] 'desk' asked for the roots -> {tmp_path.as_uri()}" in lines
    assert (
        f"  [host] 'desk' asks the user 'Export the notes to {tmp_path.as_uri()}?' -> "
        "{'format': 'markdown', 'include_archived': False}"
    ) in lines
    assert "  [event] desk log (info): exported 2 notes as markdown" in lines
    assert "  [event] notes stderr: notes server ready" in lines
    # The crash: tools withdrawn, a reconnect planned 1 s out, the call waits for it.
    assert (
        "  [event] tools changed (version 4): -mcp_notes_add_note -mcp_notes_archive "
        "-mcp_notes_search -mcp_notes_sync"
    ) in lines
    assert any(
        line.startswith("  [event] notes: ready -> reconnecting (next attempt in ")
        for line in lines
    )
    assert "  [event] notes: reconnecting -> ready" in lines
    assert out.count("; next connection attempt in ") == 1
    assert "(the model's tool list is rebuilt: 5 tools)" in lines
    # Shutdown: the finally: block still called a tool while cancelled; nothing is left.
    assert (
        "Saved from the finally: block, while cancelled: "
        '{"body":"11 tool calls, 5 failed","title":"session summary"}'
    ) in lines
    assert "Session cancelled: True" in lines
    for server in ("notes", "weather", "desk"):
        # the tools are withdrawn while it is still READY, then its transport is closed
        assert f"  [event] {server}: ready -> stopping" in lines
        assert f"  [event] {server}: stopping -> stopped" in lines
    assert "Shut down: every server stopped, all 3 server processes gone." in lines


def test_agent_host_in_the_hosts_nursery(tmp_path: Path) -> None:
    done = run_example("--nursery", cwd=tmp_path)
    out = done.stdout
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{done.stderr}"
    lines = out.splitlines()
    assert lines[0] == "Starting the runtime in the host's own nursery..."
    assert lines[-1] == "OK: everything went as expected."
    assert "UNEXPECTED" not in out
    assert "Traceback" not in done.stderr
    assert "  mcp_notes_search <- [ok] 2 notes match: 'groceries', 'call the plumber'" in lines
    assert "  mcp_weather_forecast <- [ok] Sunny, 21 °C, light wind from the west." in lines
    assert "  mcp_weather_climate_report <- [ok] climate report: 3 sections, 12 charts" in lines
    assert (
        "A call after aclose(): RuntimeClosed: the runtime is closed; open a new one to make calls"
    ) in lines
    for server in ("notes", "weather", "desk"):
        # the tools are withdrawn while it is still READY, then its transport is closed
        assert f"  [event] {server}: ready -> stopping" in lines
        assert f"  [event] {server}: stopping -> stopped" in lines
    assert "Shut down: every server stopped, all 2 server processes gone." in lines


def test_agent_host_help_names_both_forms(tmp_path: Path) -> None:
    done = run_example("--help", cwd=tmp_path)
    assert done.returncode == 0
    assert "--nursery" in done.stdout
    assert "serve_runtime" in done.stdout


# --------------------------------------------------------------------------- docs/embedding.md

GUIDE = EXAMPLE.parent.parent / "docs" / "embedding.md"
FENCE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def guide_program() -> str:
    """Every ``python`` block of the embedding guide, in order, as one module."""
    blocks = FENCE.findall(GUIDE.read_text(encoding="utf-8"))
    assert len(blocks) >= 10, "the guide's python blocks were not found"
    return "\n\n".join(blocks)


def test_every_snippet_of_the_embedding_guide_runs(tmp_path: Path) -> None:
    program = tmp_path / "guide.py"
    program.write_text(guide_program(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(program)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    lines = done.stdout.splitlines()
    # What the comments in the guide say each snippet prints.
    assert lines[:2] == ["['mcp_demo_greet', 'mcp_demo_report']", '{"name":"Ada"}']
    assert 'saved while cancelled: {"saved":true}' in lines
    assert "60.0" in lines
    assert "('{\"x\":1}', False)" in lines
    assert "(\"there is no tool named 'mcp_demo_grete'\", True)" in lines
    assert "progress 4/4 step 4 of 4" in lines
    # Call hooks, the error policy, many servers.
    hooks = lines.index("-> runtime mcp_kv_get kv/get {'key': 'a'} 1")
    assert lines[hooks : hooks + 4] == [
        "-> runtime mcp_kv_get kv/get {'key': 'a'} 1",
        '<- {"key":"a"}',
        "{'example.com/trace': 't1', 'example.com/tenant': 'acme'}",
        "tool_error deleting is turned off for this session",
    ]
    assert lines[hooks + 4 : hooks + 10] == [
        "-> runtime mcp_flaky_fetch flaky/fetch {'id': 7} 2",
        '<- {"id":7}',
        "-> runtime mcp_flaky_pay flaky/pay {'amount': 5} 1",
        "<- ",
        "raised to the host: ToolExecutionError flaky",
        '{"id":7}',
    ]
    assert lines[hooks + 10 : hooks + 15] == [
        "('fast',) ('slow', 'down')",
        "('fast', 'slow') ('down',) False",
        "ConnectError",
        "('down',)",
        "2 of 3 servers are ready",
    ]
    # Tasks: a handle started, polled and awaited; then one resumed from the task store.
    assert "task-1 working" in lines
    assert "progress 1/? completed" in lines
    assert "report of task-1" in lines
    assert "research task-2 report of task-2" in lines
    assert lines[lines.index("research task-2 report of task-2") + 1] == "()"
    assert "{'roots': {'listChanged': False}, 'sampling': {}, 'elicitation': {'form': {}}}" in lines
    assert "1 root, a short summary, markdown" in lines
    # Sampling through a real model (the OpenAI SDK over a fake transport).
    at = lines.index("{'sampling': {'tools': {}}}")
    assert lines[at + 1 : at + 5] == [
        "sample for summary with gpt-4.1 ?",
        "provider got: gpt-4.1 Sum up.",
        "gpt-4.1: Three tools, all read-only.",
        "SamplingUsage(requests=1, input_tokens=42, output_tokens=8, refused=0)",
    ]
    # Many users: per-call credentials (headers per call, a tenant's own OAuth sign-in).
    at = lines.index("Tenant('alice', headers=['Authorization'])")
    assert lines[at + 1 : at + 4] == [
        "[('alice', 'Bearer alice-token'), ('bob', 'Bearer bob-token'), "
        "('operator', 'Bearer op-token')]",
        "AuthorizationRequired rt.login('docs', tenant='carol', prompt=...) ready",
        'signed_in {"who":"carol"}',
    ]
    assert "demo: connecting -> ready" in lines
    assert "demo: ready -> stopping" in lines
    assert "demo: stopping -> stopped" in lines
    assert "demo ready 2025-11-25 2" in lines
    assert "Read me first." in lines
    assert "user Review this python code." in lines
    assert "['python', 'pyret']" in lines
    assert "['memo://today']" in lines
    assert "updated: notes memo://today" in lines
    # Skills: the host's API, then the model's catalogue and its two tools.
    assert "('docs', 'skill://pdf/SKILL.md') pdf 2" in lines
    assert (
        "not used: skill://x/SKILL.md the last segment of its skill path ('x') is not its "
        "frontmatter name ('y')"
    ) in lines
    assert "['SKILL.md', 'references']" in lines
    assert "skill://pdf/references/FORMS.md Fill the form." in lines
    assert "- pdf [id: mcp:docs:skill://pdf/SKILL.md]: Work with PDF files." in lines
    assert "['activate_mcp_skill', 'read_mcp_skill_file']" in lines
    assert "approve? activate_mcp_skill mcp:docs:skill://pdf/SKILL.md" in lines
    assert 'ok <mcp-skill server="docs" uri="skill://pdf/SKILL.md">' in lines
    assert "ok Fill the form." in lines
    # Nothing was written into the working directory (the task store is elsewhere).
    assert not (tmp_path / ".trio-mcp").exists()
    # The provider export and round trips.
    assert "('mcp_shop_chart', 'mcp_shop_search')" in lines
    assert "True {'type': ['integer', 'null'], 'description': '(default: 10)'}" in lines
    assert (
        "strict mode: 1 optional property made required and nullable (null means left out); "
        "moved into descriptions: default"
    ) in lines
    assert 'tool call_1 {"query":"tea"}' in lines
    assert "tool call_2 sales by month" in lines
    assert "user None 2" in lines
    assert "data:image/png;base64," in lines
    assert "toolu_1 ['text', 'image']" in lines
    # Tool shaping, server instructions, a large catalogue behind search_mcp_tools.
    assert (
        "search_issues {'words': {'type': 'string'}, 'limit': {'type': 'integer', 'default': 5}}"
    ) in lines
    assert '{"limit":5,"query":"crash","repo":"acme/app"}' in lines
    assert (
        "close_issue | its shaping rule does not fit the tool: the tool has no argument 'reason'"
    ) in lines
    assert "['helpdesk', 'sneaky']" in lines
    assert "possible prompt injection in instructions" in lines
    assert '<mcp_server_instructions server="helpdesk" trust="untrusted">' in lines
    assert "Look a customer up before you open a ticket. Times are UTC." in lines
    assert "('mcp_many_report_1', 'search_mcp_tools')" in lines
    assert "1 tools found; they can be called now. ['mcp_many_send_invoice']" in lines
    assert "('mcp_many_report_1', 'mcp_many_send_invoice', 'search_mcp_tools')" in lines
    # Provider-hosted MCP.
    at = lines.index("['create_issue', 'delete_project', 'get_issue']")
    assert lines[at + 1 : at + 6] == [
        "{'always': {'tool_names': ['create_issue', 'delete_project']}, "
        "'never': {'tool_names': ['get_issue']}}",
        "the header Authorization is left out (a secret: include_secrets=True sends it)",
        "build - a stdio server runs on this machine: the provider cannot start it (only remote "
        "HTTP servers can be provider-hosted)",
        "{'enabled': True, 'allowed_tools': ['get_issue']} tk-123 ('mcp-client-2025-04-04',)",
        "left out, the runtime would ask before calling them and Anthropic's connector never "
        "asks: create_issue, delete_project (an 'allow' rule lets them in)",
    ]
    assert lines[-4:] == [
        "tools/list ok",
        "mcp connect ready",
        "tools/call greet ok",
        "agent turn None",
    ]


# --------------------------------------------------------------------------- docs/testing.md

TESTING_GUIDE = EXAMPLE.parent.parent / "docs" / "testing.md"


def test_every_snippet_of_the_testing_guide_passes(tmp_path: Path) -> None:
    """The guide's snippets are pytest-trio tests (and a few scripts): run them as such."""
    blocks = FENCE.findall(TESTING_GUIDE.read_text(encoding="utf-8"))
    assert len(blocks) >= 6, "the testing guide's python blocks were not found"
    for number, block in enumerate(blocks):
        (tmp_path / f"test_snippet_{number}.py").write_text(block, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\ntrio_mode = true\naddopts = -p no:anyio -p no:cacheprovider\n"
        "filterwarnings = error\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert " passed" in done.stdout
    assert "failed" not in done.stdout


# --------------------------------------------------------------------------- every other page

DOCS = GUIDE.parent
#: Pages whose python blocks have a test of their own above.
OWN_TESTS = frozenset({"embedding.md", "testing.md"})
#: For each other page with python blocks: lines its blocks print (run in order as one
#: program, in an empty directory). A page with python blocks must be listed here: a block that
#: is not a Python program belongs in another fence (```text, ```toml, ```sh...).
PRINTS: dict[str, list[str]] = {
    "architecture.md": ["fs True", "True"],
    "auth.md": [
        "[chat] Sign in to docs (a link)",
        '[chat] docs says {"text":"hello"}',
        "[chat] docs needs a sign-in",
        "ready",
    ],
    "configuration.md": ["echo ['agent.yaml']", "['mcp_demo_greet']"],
}


def pages_with_python() -> list[str]:
    return sorted(
        page.name
        for page in DOCS.glob("*.md")
        if FENCE.search(page.read_text(encoding="utf-8")) is not None
    )


def test_the_pages_with_python_blocks_are_known() -> None:
    pages = set(pages_with_python())
    assert "configuration.md" in pages
    assert pages <= OWN_TESTS | set(PRINTS), (
        f"add what the python blocks of {sorted(pages - OWN_TESTS - set(PRINTS))} print to PRINTS"
    )


@pytest.mark.parametrize("page", sorted(set(pages_with_python()) - OWN_TESTS))
def test_every_snippet_of_the_page_runs(page: str, tmp_path: Path) -> None:
    blocks = FENCE.findall((DOCS / page).read_text(encoding="utf-8"))
    program = tmp_path / "page.py"
    program.write_text("\n\n".join(blocks), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(program)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    lines = done.stdout.splitlines()
    for expected in PRINTS.get(page, ["(the page is not in PRINTS)"]):
        assert expected in lines, f"{page} did not print {expected!r}:\n{done.stdout}"
