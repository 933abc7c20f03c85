"""What a hostile server can send: deeply nested JSON, and strategies for arbitrary JSON text.

Shared by the protocol tests and the transport tests. ``nest`` and ``deep_value`` build nesting
without recursion (100,000 levels are cheap); ``json_texts`` draws JSON-like text that is valid
or nearly so, with what a careless or hostile peer writes: deep and wide containers, odd
unicode, huge numbers, ``NaN`` and ``Infinity``, duplicate keys, lone surrogates (escaped, and
raw in a ``str``), truncations and trailing garbage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from hypothesis import strategies as st

Kind = Literal["arrays", "objects", "mixed"]
KINDS: tuple[Kind, ...] = ("arrays", "objects", "mixed")


def at_depth(frames: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` from a stack ``frames`` Python frames deeper than the caller's."""
    if frames <= 0:
        return fn(*args, **kwargs)
    return at_depth(frames - 1, fn, *args, **kwargs)


def nest(kind: Kind, depth: int, inner: str = "1") -> str:
    """JSON text of ``depth`` arrays or objects (``{"a": ...}``), one inside the other, around
    ``inner``; ``mixed`` alternates an array and an object, starting with an array."""
    if kind == "arrays":
        return "[" * depth + inner + "]" * depth
    if kind == "objects":
        return '{"a":' * depth + inner + "}" * depth
    pairs, odd = divmod(depth, 2)
    return '[{"a":' * pairs + "[" * odd + inner + "]" * odd + "}]" * pairs


def deep_value(kind: Kind, depth: int, inner: Any = 1) -> Any:
    """The Python value of ``nest(kind, depth, json.dumps(inner))``, built without recursion."""
    value = inner
    for level in range(depth, 0, -1):
        if kind == "arrays" or (kind == "mixed" and level % 2 == 1):
            value = [value]
        else:
            value = {"a": value}
    return value


def answer_frame(kind: Kind, depth: int, *, padding: int = 0) -> str:
    """A ``tools/call`` answer nested ``depth`` deep in all: the message (1), its result (2)
    and the containers of its ``structuredContent`` (3 to ``depth``); with ``padding``, a text
    block of that many characters comes first."""
    content = f'[{{"type":"text","text":"{"x" * padding}"}}]' if padding else "[]"
    return (
        '{"jsonrpc":"2.0","id":1,"result":{"content":'
        + content
        + ',"structuredContent":'
        + nest(kind, depth - 2)
        + "}}"
    )


# --------------------------------------------------------------------------- strategies

_KEYS = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "a", ""])
_LITERALS = st.sampled_from(
    [
        "null",
        "true",
        "false",
        '"2.0"',
        "NaN",
        "-NaN",
        "Infinity",
        "-Infinity",
        "1e999",
        "-1e999",
        "1e-999",
        "-0",
        "0.0e+0",
        "1" * 5000,
        "-" + "9" * 4301,
        "0." + "1" * 2000,
        '"\\ud800"',
        '"\\udc00\\ud800"',
        '"\\u0000"',
        '"\\uFFFF\\uFEFF"',
        '"\ud800"',
        '"\u2028\u2029"',
        '"\U0001f600"',
        '"\\"',
        "01",
        "+1",
        ".5",
        "tru",
    ]
)
_SCALARS = st.one_of(
    _LITERALS,
    st.integers().map(str),
    st.floats().map(json.dumps),
    st.text(max_size=10).map(json.dumps),
    st.text(max_size=10).map(lambda s: json.dumps(s, ensure_ascii=False)),
)


def _containers(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(children, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
        st.lists(st.tuples(_KEYS.map(json.dumps), children), max_size=5).map(
            lambda pairs: "{" + ",".join(f"{key}:{value}" for key, value in pairs) + "}"
        ),
    )


#: JSON-like text, nearly always valid JSON up to its literals.
json_values = st.recursive(_SCALARS, _containers, max_leaves=24)

#: Deep nesting, from a few levels to 100,000.
deep_texts = st.builds(
    nest,
    st.sampled_from(KINDS),
    st.sampled_from([1, 2, 200, 255, 256, 257, 900, 990, 1100, 100_000]),
    json_values,
)


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    """JSON-like text as a peer may send it: a value (deep or not), maybe a message envelope
    around it, maybe cut short, maybe with garbage after it."""
    value = draw(st.one_of(json_values, deep_texts))
    if draw(st.booleans()):
        member = draw(st.sampled_from(["result", "params", "error", "id", "method", "jsonrpc"]))
        value = '{"jsonrpc":"2.0","id":1,"' + member + '":' + value + "}"
    if draw(st.booleans()):
        value = "[" + value + "]"
    if draw(st.integers(0, 3)) == 0:
        value = value[: draw(st.integers(0, len(value)))]
    if draw(st.integers(0, 3)) == 0:
        value += draw(st.text(max_size=10) | json_values)
    return value


def as_bytes(text: str) -> bytes:
    """``text`` as UTF-8, a lone surrogate written as its three bytes (which are not UTF-8)."""
    return text.encode("utf-8", "surrogatepass")
