"""The specification example checker (``tests/protocol/spec_examples.py``).

The checker's own machinery is tested on small documents written here. The real run over the
specification needs a spec checkout: set ``MCP_SPEC_REPO`` to a checkout or a bare git dir of the
``modelcontextprotocol/modelcontextprotocol`` repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.protocol.spec_examples import (
    REVISIONS,
    CodeBlock,
    DirectorySource,
    GitSource,
    LeftOut,
    Outcome,
    RevisionReport,
    Status,
    check_all,
    check_doc_file,
    check_revision,
    check_schema_example,
    extract_code_blocks,
    format_report,
    main,
    open_source,
    strip_json_comments,
)

# --------------------------------------------------------------------------- text helpers


def test_extract_code_blocks() -> None:
    text = "\n".join(
        [
            "# Title",  # 1
            "```json",  # 2
            '{"a": 1}',  # 3
            "```",  # 4
            "text",  # 5
            "  ~~~jsonc title=x",  # 6
            "  [1, 2]",  # 7
            "  ~~~",  # 8
            "````markdown",  # 9
            "```json",  # 10
            "{}",  # 11
            "```",  # 12
            "````",  # 13
            "```",  # 14
            "plain",  # 15
            "```",  # 16
            "```json",  # 17
            "{",  # 18
        ]
    )
    assert extract_code_blocks(text) == [
        CodeBlock(lang="json", line=3, body='{"a": 1}'),
        CodeBlock(lang="jsonc", line=7, body="  [1, 2]"),
        CodeBlock(lang="markdown", line=10, body="```json\n{}\n```"),
        CodeBlock(lang="", line=15, body="plain"),
        CodeBlock(lang="json", line=18, body="{"),
    ]


def test_strip_json_comments() -> None:
    text = """{
  "url": "http://x//y", // a comment
  "q": "say \\"hi\\" // not a comment",
  /* block
     comment */ "list": [1, 2,],
}"""
    assert strip_json_comments(text) == (
        '{\n  "url": "http://x//y", \n  "q": "say \\"hi\\" // not a comment",\n   "list": [1, 2]\n}'
    )


# --------------------------------------------------------------------------- documents

DOC = """
A request and its answer:

```json
{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
```

```json
{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}}
```

A notification, an error and a response nobody asked for:

```json
{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
```

```json
{"jsonrpc": "2.0", "id": 9, "error": {"code": -32602, "message": "Unknown tool"}}
```

```json
{"jsonrpc": "2.0", "id": 2, "result": {}}
```

Not messages:

```json
{"io.example/flag": true}
```

```json
{"jsonrpc": "2.0", "id": 3, "result": {"tools": [...]}}
```

```typescript
const x = {"jsonrpc": "2.0"};
```

With comments, a server request and the client's answer:

```jsonc
{
  "jsonrpc": "2.0",
  "id": 1, // the server's own id
  "method": "roots/list",
}
```

```json
{"jsonrpc": "2.0", "id": 1, "result": {"roots": [{"uri": "file:///tmp"}]}}
```

A broken tool list:

```json
{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}
```

```json
{"jsonrpc": "2.0", "id": 4, "result": {"tools": [{"name": "t", "inputSchema": []}]}}
```
"""


def _by_line(outcomes: list[Outcome]) -> dict[int, tuple[Status, str]]:
    return {int(o.location.rsplit(":", 1)[1]): (o.status, o.detail) for o in outcomes}


def test_check_doc_file() -> None:
    outcomes = check_doc_file("docs/x.mdx", DOC)
    assert all(o.source == "doc block" for o in outcomes)
    assert all(o.location.startswith("docs/x.mdx:") for o in outcomes)
    assert _by_line(outcomes) == {
        5: (Status.DECODED, "tools/list request params -> PaginatedRequestParams"),
        9: (Status.DECODED, "tools/list result -> ListToolsResult"),
        15: (
            Status.DECODED,
            "notifications/tools/list_changed notification params -> NotificationParams",
        ),
        19: (Status.DECODED, "error -32602 -> InvalidParams"),
        23: (
            Status.LEFT_OUT,
            "unpairable response: no request with id 2 earlier in the file, and its result "
            "keys do not say which method it answers",
        ),
        29: (Status.LEFT_OUT, "not a JSON-RPC message: a fragment with keys [io.example/flag]"),
        33: (Status.LEFT_OUT, "JSON with an ellipsis placeholder (...)"),
        43: (Status.DECODED, "roots/list request params -> RequestParams (comments removed)"),
        51: (Status.DECODED, "roots/list result -> ListRootsResult"),
        57: (Status.DECODED, "tools/list request params -> PaginatedRequestParams"),
        61: (
            Status.FAILED,
            "InvalidMessage: invalid ListToolsResult: expected an object, got an array "
            "@ $.result.tools[0].inputSchema",
        ),
    }
    assert len(outcomes) == 11  # the typescript block is not JSON


def _doc(*blocks: str) -> str:
    return "".join(f"```json\n{block}\n```\n" for block in blocks)


def _details(doc: str, path: str = "docs/d.mdx") -> list[tuple[Status, str]]:
    return [(o.status, o.detail) for o in check_doc_file(path, doc)]


def test_check_doc_file_batch_input_request_and_text_mistakes() -> None:
    doc = _doc(
        '[{"jsonrpc": "2.0", "id": "a", "method": "ping"},\n'
        ' {"jsonrpc": "2.0", "method": "notifications/initialized"}]',
        '{"method": "roots/list"}',
        '{"a": 1}\n{"b": 2}',
        '{"jsonrpc": "2.0", "method": "tools/list", "params": {}}',
        '{"jsonrpc": "2.0", "id": 8, "method": "some_method", "params": {}}',
        '{"jsonrpc": "2.0", "id": 8, "result": {}}',
        '{"jsonrpc": "2.0", "method": "notifications/made_up"}',
        '{"jsonrpc": "2.0", "id": 3, "result": {"content": [], "note": "..."}}',
        '{"jsonrpc": "2.0", "id": 3, "result": {"content": [1, 2]}}',
        '{"a": 1 "b": 2}',
    )
    assert _details(doc) == [
        (
            Status.DECODED,
            "batch of 2: ping request params -> RequestParams; "
            "notifications/initialized notification params -> NotificationParams",
        ),
        (Status.DECODED, "roots/list input request params -> RequestParams"),
        (Status.LEFT_OUT, "not one JSON value: 2 values in one block"),
        (
            Status.LEFT_OUT,
            "a mistake in the text: a tools/list request without an id (so a notification)",
        ),
        (Status.LEFT_OUT, "a request for the placeholder method 'some_method'"),
        (Status.LEFT_OUT, "the answer to a request for the placeholder method 'some_method'"),
        (Status.FAILED, "LookupError: no wire type for notification 'notifications/made_up'"),
        (
            Status.DECODED,
            "tools/call result -> CallToolResult (method inferred from the result's keys)",
        ),
        (
            Status.FAILED,
            "InvalidMessage: invalid CallToolResult: expected an object, got a number "
            "@ $.result.content[0] (and 1 more)\n"
            "      expected an object, got a number @ $.result.content[0]\n"
            "      expected an object, got a number @ $.result.content[1]",
        ),
        (
            Status.LEFT_OUT,
            "not valid JSON (Expecting ',' delimiter: line 1 column 9 (char 8))",
        ),
    ]


def test_fragments_typed_by_their_keys() -> None:
    doc = _doc(
        '{"type": "text", "text": "hi"}',
        '{"type": "tool_use", "id": "u1", "name": "t", "input": {}}',
        '{"name": "t", "inputSchema": {"type": "object"}}',
        '{"uri": "file:///a.txt", "text": "x"}',
        '[{"uri": "file:///a", "name": "A"}, {"uri": "file:///b"}]',
        '{"uri": "https://x/y", "name": "y", "mimeType": "text/plain"}',
        '{"hints": [{"name": "m"}], "costPriority": 0.2}',
        '{"action": "decline"}',
        '{"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}',
        '{"roots": []}',
        '{"capabilities": {"roots": {"listChanged": true}}}',
        '{"capabilities": {"tools": {"listChanged": true}}}',
        '{"capabilities": {"experimental": {}}}',
        '{"k": {"method": "roots/list"}}',
        '{"k": {"action": "accept", "content": {"a": 1}}}',
        '{"type": "object", "properties": {}}',
        "[1, 2]",
        '"text"',
    )
    assert _details(doc, "docs/client/sampling.mdx") == [
        (Status.DECODED, "fragment typed by its keys as ContentBlock -> TextContent"),
        (
            Status.DECODED,
            "fragment typed by its keys as SamplingMessageContentBlock -> ToolUseContent",
        ),
        (Status.DECODED, "fragment typed by its keys as Tool -> Tool"),
        (
            Status.DECODED,
            "fragment typed by its keys as ResourceContents -> TextResourceContents",
        ),
        (Status.DECODED, "array of 2: fragment typed by its keys as Root -> Root"),
        (Status.DECODED, "fragment typed by its keys as Resource -> Resource"),
        (Status.DECODED, "fragment typed by its keys as ModelPreferences -> ModelPreferences"),
        (Status.DECODED, "fragment typed by its keys as ElicitResult -> ElicitResult"),
        (
            Status.DECODED,
            "fragment typed by its keys as CreateMessageResult -> CreateMessageResult",
        ),
        (Status.DECODED, "fragment typed by its keys as ListRootsResult -> ListRootsResult"),
        (
            Status.DECODED,
            "fragment typed by its keys as ClientCapabilities -> ClientCapabilities",
        ),
        (
            Status.DECODED,
            "fragment typed by its keys as ServerCapabilities -> ServerCapabilities",
        ),
        (Status.LEFT_OUT, "a capabilities fragment that does not say whether client or server"),
        (Status.DECODED, "fragment typed by its keys as InputRequests -> dict of ListRootsRequest"),
        (Status.DECODED, "fragment typed by its keys as InputResponses -> dict of ElicitResult"),
        (Status.LEFT_OUT, "a JSON Schema fragment: trio-mcp keeps schemas as raw JSON"),
        (Status.LEFT_OUT, "not a JSON-RPC message: a fragment (an array)"),
        (Status.LEFT_OUT, "not a JSON-RPC message: a fragment (str)"),
    ]
    ((status, detail),) = _details(_doc('{"type": "image", "data": 5, "mimeType": "image/png"}'))
    assert status is Status.FAILED
    assert detail.startswith("InvalidMessage: invalid ")  # the content union, by its members
    assert detail.endswith(": expected a string, got a number @ $.data")
    role_content = _doc('{"role": "user", "content": {"type": "text", "text": "x"}}')
    assert _details(role_content, "docs/client/sampling.mdx") == [
        (Status.DECODED, "fragment typed by its keys as SamplingMessage -> SamplingMessage")
    ]
    assert _details(role_content, "docs/server/prompts.mdx") == [
        (Status.DECODED, "fragment typed by its keys as PromptMessage -> PromptMessage")
    ]
    assert _details(role_content, "docs/basic/index.mdx") == [
        (Status.LEFT_OUT, "not a JSON-RPC message: a fragment with keys [content, role]")
    ]


def test_by_shape_flag() -> None:
    outcomes = check_doc_file(
        "d.mdx",
        _doc(
            '{"type": "text", "text": "hi"}',
            '{"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}',
            '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        ),
    )
    assert [o.by_shape for o in outcomes] == [True, True, False]


# --------------------------------------------------------------------------- schema examples


def test_schema_error_examples() -> None:
    assert check_schema_example("ParseError", {"code": -32700, "message": "bad"}) == (
        "error -32700 -> ParseError"
    )
    assert (
        check_schema_example(
            "UnsupportedProtocolVersionError",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {"code": -32022, "message": "no", "data": {"supported": []}},
            },
        )
        == "error -32022 -> UnsupportedProtocolVersion"
    )
    with pytest.raises(ValueError, match=r"^error code -32601, expected -32602$"):
        check_schema_example("InvalidParamsError", {"code": -32601, "message": "m"})


def test_schema_message_examples() -> None:
    request = {"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "t"}}
    assert check_schema_example("CallToolRequest", request) == (
        "tools/call request params -> CallToolRequestParams"
    )
    response = {"jsonrpc": "2.0", "id": "x", "result": {"content": []}}
    assert check_schema_example("CallToolResultResponse", response) == (
        "tools/call result -> CallToolResult"
    )
    with pytest.raises(ValueError, match=r"^expected a request, got a Response$"):
        check_schema_example("CallToolRequest", response)


def test_schema_type_examples() -> None:
    assert check_schema_example("TextContent", {"type": "text", "text": "hi"}) == (
        "TextContent -> TextContent"
    )
    with pytest.raises(LeftOut, match=r"^StringSchema is a JSON Schema fragment"):
        check_schema_example("StringSchema", {"type": "string"})
    with pytest.raises(LookupError, match=r"^no wire type named NoSuchThing in WIRE_TYPES$"):
        check_schema_example("NoSuchThing", {})


# --------------------------------------------------------------------------- sources and report


def _write_spec(root: Path) -> None:
    examples = root / "schema" / "2026-07-28" / "examples"
    (examples / "TextContent").mkdir(parents=True)
    (examples / "TextContent" / "ok.json").write_text('{"type": "text", "text": "hi"}')
    (examples / "TextContent" / "bad.json").write_text('{"type": "text", "text": 5}')
    (examples / "BooleanSchema").mkdir()
    (examples / "BooleanSchema" / "b.json").write_text('{"type": "boolean"}')
    docs = root / "docs" / "specification" / "2026-07-28" / "server"
    docs.mkdir(parents=True)
    (docs / "tools.mdx").write_text(
        '```json\n{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}\n```\n'
    )
    (docs / "notes.txt").write_text("ignored")


def _expected_report(report: RevisionReport) -> None:
    assert report.revision == "2026-07-28"
    assert [(o.location, o.status) for o in report.outcomes] == [
        ("schema/2026-07-28/examples/BooleanSchema/b.json", Status.LEFT_OUT),
        ("schema/2026-07-28/examples/TextContent/bad.json", Status.FAILED),
        ("schema/2026-07-28/examples/TextContent/ok.json", Status.DECODED),
        ("docs/specification/2026-07-28/server/tools.mdx:2", Status.DECODED),
    ]
    assert report.found() == 4
    assert report.found("schema example") == 3
    assert report.count(Status.DECODED) == 2
    assert report.count(Status.FAILED, "schema example") == 1
    (failure,) = report.failures
    assert failure.detail.startswith("InvalidMessage: ")
    assert "$.text" in failure.detail


def test_directory_source(tmp_path: Path) -> None:
    _write_spec(tmp_path)
    source = open_source(tmp_path)
    assert source == DirectorySource(tmp_path)
    assert source.list_files("schema/2025-06-18/examples") == []
    _expected_report(check_revision(source, "2026-07-28"))


def test_git_source_reads_a_bare_repository(tmp_path: Path) -> None:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    work = tmp_path / "work"
    _write_spec(work)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "spec"]):
        subprocess.run([git, *args], cwd=work, env=env, check=True)
    subprocess.run(
        [git, "clone", "-q", "--bare", str(work), str(tmp_path / "bare.git")], check=True
    )
    source = open_source(tmp_path / "bare.git")
    assert source == GitSource(tmp_path / "bare.git", "HEAD")
    assert source.list_files("docs/specification/2026-07-28") == [
        "docs/specification/2026-07-28/server/notes.txt",
        "docs/specification/2026-07-28/server/tools.mdx",
    ]
    _expected_report(check_revision(source, "2026-07-28"))
    with pytest.raises(RuntimeError, match=r"^git ls-tree .* failed in "):
        GitSource(tmp_path / "bare.git", "no-such-rev").list_files("schema")


def test_open_source_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(FileNotFoundError, match=r"is not a directory"):
        open_source(tmp_path / "f")


def test_format_report_and_main(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_spec(tmp_path)
    reports = check_all(open_source(tmp_path), ("2025-11-25", "2026-07-28"))
    text = format_report(reports)
    lines = text.splitlines()
    assert lines[0].split() == [
        "revision",
        "source",
        "found",
        "decoded",
        "by",
        "shape",
        "left",
        "out",
        "failed",
    ]
    assert lines[1].split() == ["2025-11-25", "schema", "examples", "0", "0", "0", "0", "0"]
    assert lines[3].split() == ["2026-07-28", "schema", "examples", "3", "1", "0", "1", "1"]
    assert lines[4].split() == ["2026-07-28", "doc", "blocks", "1", "1", "0", "0", "0"]
    assert lines[5].split() == ["total", "4", "2", "0", "1", "1"]
    assert "== 2026-07-28" in lines
    assert any(
        line.startswith("  [left out] schema/2026-07-28/examples/BooleanSchema/b.json: ")
        for line in lines
    )
    assert any(
        line.startswith("  [failed] schema/2026-07-28/examples/TextContent/bad.json: ")
        for line in lines
    )
    assert not any(line.startswith("  [decoded]") for line in lines)
    assert "  [decoded] schema/2026-07-28/examples/TextContent/ok.json: " in (
        format_report(reports, verbose=True)
    )

    assert main([str(tmp_path), "--revision", "2026-07-28"]) == 1
    assert capsys.readouterr().out.splitlines()[0].startswith("revision")
    (tmp_path / "schema" / "2026-07-28" / "examples" / "TextContent" / "bad.json").unlink()
    assert main([str(tmp_path)]) == 0
    assert main([str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err


# --------------------------------------------------------------------------- the real spec


@pytest.fixture
def spec_repo() -> Path:
    value = os.environ.get("MCP_SPEC_REPO")
    if not value:
        pytest.skip(
            "set MCP_SPEC_REPO to a checkout (or bare git dir) of "
            "modelcontextprotocol/modelcontextprotocol to decode the specification's examples"
        )
    return Path(value)


def test_every_spec_example_decodes(spec_repo: Path) -> None:
    reports = check_all(open_source(spec_repo))
    assert [r.revision for r in reports] == list(REVISIONS)
    for report in reports:
        assert report.found("doc block") > 0, f"no documentation examples for {report.revision}"
    modern = reports[-1]
    assert modern.found("schema example") > 0, "no schema/2026-07-28/examples found"
    failures = [f"{o.location}: {o.detail}" for r in reports for o in r.failures]
    assert failures == [], format_report(reports)
