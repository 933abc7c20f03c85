"""``trio-mcp call`` around the call: ``--arg``, the progress bar, elicitation forms on the
terminal, ``--save``, ``-vv`` frames, ``--wait``, and the global options anywhere. Run through
``main(argv)`` against in-memory fake servers (the loaded configuration is replaced by one that
reaches them), with a fake terminal where one is needed."""

from __future__ import annotations

import base64
import io
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp.actors.cli import _cli
from trio_mcp.actors.cli._cli import main
from trio_mcp.actors.config._config import RuntimeConfig
from trio_mcp.actors.config._loader import LoadedConfig
from trio_mcp.actors.testing._fakes import FakeServer, FakeTool, ToolContext

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
WAV = b"RIFF\x00\x00\x00\x00WAVE"
BLOB = b"%PDF-1.7 report"


class Terminal(io.StringIO):
    """A stream that says it is a terminal (stdin with the user's answers typed in, or
    stdout)."""

    def isatty(self) -> bool:
        return True


async def _slow(arguments: dict[str, Any], ctx: ToolContext) -> str:
    for step in (1, 2, 3, 4):
        await ctx.progress(step, total=4, message=f"step {step}")
        await trio.sleep(0.01)
    return "done"


FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 1},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "color": {"type": "string", "enum": ["red", "green"]},
        "subscribe": {"type": "boolean", "default": False},
    },
    "required": ["name", "age"],
}


async def _ask(arguments: dict[str, Any], ctx: ToolContext) -> str:
    answer = await ctx.request(
        "elicitation/create", {"message": "Who are you?", "requestedSchema": FORM}
    )
    return json.dumps(answer, sort_keys=True)


def _media(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {
        "content": [
            {"type": "text", "text": "here"},
            {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"},
            {"type": "audio", "data": base64.b64encode(WAV).decode(), "mimeType": "audio/wav"},
            {
                "type": "resource",
                "resource": {
                    "uri": "file:///reports/../q3 report.pdf",
                    "mimeType": "application/pdf",
                    "blob": base64.b64encode(BLOB).decode(),
                },
            },
        ]
    }


def _fake() -> FakeServer:
    return FakeServer(
        name="demo",
        tools=[
            FakeTool("echo"),
            FakeTool("slow", handler=_slow),
            FakeTool("ask", handler=_ask),
            FakeTool("media", handler=_media),
        ],
    )


@pytest.fixture
def demo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """``--config`` of any file loads a configuration with the in-memory server ``demo``."""
    fake = _fake()

    def load(path: Any = None) -> LoadedConfig:
        return LoadedConfig(
            config=RuntimeConfig(servers=(fake.server_config("demo"),)),
            shape="agentao",
            sources=(str(path),),
        )

    monkeypatch.setattr(_cli, "load_config", load)
    return tmp_path / "mcp.json"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --------------------------------------------------------------------------- --arg


def test_arg_values_are_json_when_they_parse(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    code, out, err = run(
        capsys,
        "call",
        "demo/echo",
        "--config",
        str(demo),
        "--args",
        '{"n": 0, "x": 1}',
        "--arg",
        "n=5",
        "--arg",
        "s=hello world",
        "--arg",
        'j={"a": [1, true]}',
        "--arg",
        'q="5"',
        "--arg",
        "a.b=null",
        "--arg",
        "e=",
    )
    assert (code, err) == (0, "")
    # Later values win over --args; a key with a dot is taken literally.
    assert json.loads(out) == {
        "n": 5,
        "x": 1,
        "s": "hello world",
        "j": {"a": [1, True]},
        "q": "5",
        "a.b": None,
        "e": "",
    }


def test_an_arg_without_equals_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "call", "demo/echo", "--arg", "oops")
    assert (code, out, err) == (2, "", "trio-mcp: error: --arg takes KEY=VALUE, got 'oops'\n")


# --------------------------------------------------------------------------- global options


def test_global_options_before_or_after_the_command(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    before = run(capsys, "--json", "--config", str(demo), "call", "demo/echo", "--arg", "a=1")
    after = run(capsys, "call", "demo/echo", "--arg", "a=1", "--config", str(demo), "--json")
    assert before == after
    assert json.loads(before[1])["text"] == '{"a":1}'
    code, _, err = run(capsys, "--config", "a.json", "tools", "--config", "b.json")
    assert (code, err) == (
        2,
        "trio-mcp: error: give --config once: before or after the command\n",
    )
    code, _, err = run(capsys, "--config", "a.json", "project", "list")
    assert (code, err) == (2, "trio-mcp: error: `trio-mcp project` does not take --config\n")


# --------------------------------------------------------------------------- progress


def test_a_progress_bar_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, demo: Path
) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["call", "demo/slow", "--config", str(demo)]) == 0
    text = terminal.getvalue()
    # Drawn in place for each notification, then erased before the result.
    for share, step in ((25, 1), (50, 2), (75, 3), (100, 4)):
        filled = "#" * (24 * share // 100)
        assert f"\r\x1b[2K[{filled}{'-' * (24 - len(filled))}] {share:3d}%  step {step}  " in text
    assert text.endswith("\r\x1b[2Kdone\n")


def test_no_progress_bar_without_a_terminal(capsys: pytest.CaptureFixture[str], demo: Path) -> None:
    code, out, err = run(capsys, "call", "demo/slow", "--config", str(demo))
    assert (code, out, err) == (0, "done\n", "")


# --------------------------------------------------------------------------- elicitation


def test_an_elicitation_form_is_asked_on_the_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, demo: Path
) -> None:
    # Empty (required), "Ada"; "abc" (not an integer), "200" (too big), "42"; "2" (the second
    # choice); empty (the default); then send.
    monkeypatch.setattr(sys, "stdin", Terminal("\nAda\nabc\n200\n42\n2\n\ny\n"))
    code, out, err = run(capsys, "call", "demo/ask", "--config", str(demo))
    assert code == 0
    assert json.loads(out) == {
        "action": "accept",
        "content": {"name": "Ada", "age": 42, "color": "green", "subscribe": False},
    }
    name = "  name (Your name) [string, required]: "
    age = "  age [integer 0..150, required]: "
    assert err == (
        "trio-mcp: the server 'demo' asks: Who are you?\n"
        f"{name}trio-mcp: name is required\n"
        f"{name}"
        f"{age}trio-mcp: age: not an integer; try again\n"
        f"{age}trio-mcp: age: must be at most 150; try again\n"
        f"{age}"
        "  color [string] one of: 1) red, 2) green: "
        "  subscribe [boolean, y/n] (default: false): "
        "Send these answers? [Y/n] "
    )


def test_a_declined_and_a_cancelled_form(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, demo: Path
) -> None:
    monkeypatch.setattr(sys, "stdin", Terminal("Ada\n1\n\n\nn\n"))
    code, out, _ = run(capsys, "call", "demo/ask", "--config", str(demo))
    assert (code, json.loads(out)) == (0, {"action": "decline"})
    monkeypatch.setattr(sys, "stdin", Terminal("Ada\n"))  # then end of input (Ctrl-D)
    code, out, _ = run(capsys, "call", "demo/ask", "--config", str(demo))
    assert (code, json.loads(out)) == (0, {"action": "cancel"})


def test_without_a_terminal_a_form_is_refused_naming_the_option(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, demo: Path
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, out, err = run(capsys, "call", "demo/ask", "--config", str(demo))
    assert (code, json.loads(out)) == (6, {"action": "cancel"})
    assert err == (
        "trio-mcp: the server 'demo' asked for input ('Who are you?'; unanswered: name, age, "
        "color, subscribe) and there is no terminal to ask on, so the form was cancelled: give "
        "the answers with --answer FIELD=VALUE (repeat it), or run the command on a terminal\n"
    )
    # --answer fills the form without asking; an optional field left out gets its default.
    code, out, err = run(
        capsys,
        "call",
        "demo/ask",
        "--config",
        str(demo),
        "--answer",
        "name=Ada",
        "--answer",
        "age=42",
        "--json",
    )
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert json.loads(document["text"]) == {
        "action": "accept",
        "content": {"name": "Ada", "age": 42, "subscribe": False},
    }
    assert document["elicitations"] == [
        {"server": "demo", "message": "Who are you?", "action": "accept"}
    ]


# --------------------------------------------------------------------------- --save


def test_save_writes_images_audio_and_blobs_never_over_a_file(
    capsys: pytest.CaptureFixture[str], demo: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "out"
    code, out, err = run(capsys, "call", "demo/media", "--config", str(demo), "--save", str(folder))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "here",
        f"[image: image/png, 16 bytes saved to {folder / 'media-1.png'}]",
        f"[audio: audio/wav, 12 bytes saved to {folder / 'media-2.wav'}]",
        f"[binary resource: application/pdf, 15 bytes saved to {folder / 'q3_report.pdf'}]",
    ]
    assert (folder / "media-1.png").read_bytes() == PNG
    assert (folder / "media-2.wav").read_bytes() == WAV
    assert (folder / "q3_report.pdf").read_bytes() == BLOB
    code, out, _ = run(
        capsys, "call", "demo/media", "--config", str(demo), "--save", str(folder), "--json"
    )
    assert [item["path"] for item in json.loads(out)["saved"]] == [
        str(folder / "media-1-1.png"),
        str(folder / "media-2-1.wav"),
        str(folder / "q3_report-1.pdf"),
    ]
    assert (folder / "media-1.png").read_bytes() == PNG  # the first one is still there
    code, out, _ = run(capsys, "call", "demo/media", "--config", str(demo))
    assert out.splitlines()[1] == (
        "[image: image/png, 24 base64 characters; --save DIR writes it to a file]"
    )
    code, _, err = run(
        capsys, "call", "demo/media", "--config", str(demo), "--save", str(folder / "media-1.png")
    )
    assert (code, err) == (
        2,
        f"trio-mcp: error: --save {folder / 'media-1.png'}: not a directory\n",
    )


# --------------------------------------------------------------------------- -vv, --wait


def test_vv_logs_every_frame_redacted(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, demo: Path
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_mcp.frames")
    code, out, _ = run(
        capsys, "call", "demo/echo", "-vv", "--config", str(demo), "--arg", "api_key=sekrit"
    )
    assert (code, out) == (0, '{"api_key":"sekrit"}\n')
    frames = [r.getMessage() for r in caplog.records if r.name == "trio_mcp.frames"]
    sent = [f for f in frames if f.startswith("demo --> ")]
    received = [f for f in frames if f.startswith("demo <-- ")]
    assert any('"method":"initialize"' in f for f in sent)
    call = next(f for f in sent if '"method":"tools/call"' in f)
    assert '"arguments":{"api_key":"***"}' in call
    assert any('"serverInfo"' in f for f in received)
    assert not any("sekrit" in f for f in frames)


def test_wait_says_when_it_ran_out(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    spec = json.dumps({"name": "slow", "hang": ["initialize"]}).replace("$", "$$")
    server = {
        "command": sys.executable,
        "args": ["-m", "trio_mcp.actors.testing", "--spec-json", spec],
    }
    path.write_text(json.dumps({"mcpServers": {"slow": server}}))
    code, out, _ = run(capsys, "status", "--config", str(path), "--wait", "0.5", "--json")
    (status,) = json.loads(out)["servers"]
    assert (code, status["state"]) == (4, "connecting")
    assert status["last_error"] == (
        "--wait 0.5: the wait ran out after 0.5 s while it was still connecting"
    )
