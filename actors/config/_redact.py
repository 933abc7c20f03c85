"""Keep secrets out of logs.

:func:`redact` copies a JSON value for logging: the value of any key that looks like it holds a
secret (token, password, api key, authorization, cookie...) becomes ``"***"``, long strings are
cut, and deep structures are bounded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["REDACTED", "looks_secret", "redact", "redact_text"]

REDACTED: Final = "***"
_SECRET_KEY = re.compile(
    r"(token|secret|passw(or)?d|passwd|api[_-]?key|apikey|auth|cookie|credential|private[_-]?key"
    r"|session[_-]?id|signature)",
    re.IGNORECASE,
)
_MAX_STRING: Final = 200
_MAX_DEPTH: Final = 8
_MAX_ITEMS: Final = 50


def looks_secret(key: str) -> bool:
    """Whether a mapping key (a header name, an env variable, an argument) suggests a secret."""
    return bool(_SECRET_KEY.search(key))


def redact(value: Any, *, _depth: int = 0) -> Any:
    """A copy of ``value`` that is safe to log."""
    if _depth >= _MAX_DEPTH:
        return "..."
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for index, (key, item) in enumerate(value.items()):
            if index >= _MAX_ITEMS:
                out["..."] = f"{len(value) - _MAX_ITEMS} more"
                break
            text = str(key)
            out[text] = REDACTED if looks_secret(text) else redact(item, _depth=_depth + 1)
        return out
    if isinstance(value, list | tuple):
        items = [redact(item, _depth=_depth + 1) for item in value[:_MAX_ITEMS]]
        if len(value) > _MAX_ITEMS:
            items.append(f"... {len(value) - _MAX_ITEMS} more")
        return items
    if isinstance(value, str) and len(value) > _MAX_STRING:
        return f"{value[:_MAX_STRING]}... ({len(value)} characters)"
    return value


def redact_text(text: str) -> str:
    """A tool's text output, safe to log: JSON text is redacted like :func:`redact`; other text
    is only cut to length (free text cannot be searched for secrets reliably)."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply to read
            pass
        else:
            return json.dumps(redact(value), ensure_ascii=False, separators=(",", ":"))
    cut: str = redact(text)
    return cut
