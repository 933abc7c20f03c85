"""Keep URL credentials out of every log record the transports cause to be written.

Our own log lines never carry a URL's user information or query string (they show
:func:`~trio_mcp.transports.http._http_base.display_url`). The libraries under the transports
log too: httpx writes ``HTTP Request: POST <url> "HTTP/1.1 200 OK"`` at INFO for every request,
with the URL as the request has it (a query such as ``?api_key=...`` included), httpcore writes
each response's headers at DEBUG (a session id, a cookie), and trio-websocket writes what it
does at DEBUG. :func:`install_log_redaction` puts a :class:`RedactingFilter` on each of those
loggers (:data:`REDACTED_LOGGERS`): every record they emit is rewritten before any handler sees
it, so that

- in every URL of the message, a password (``user:***@``, or ``***@`` for user information
  without a password, which is then usually a token) and every query value (``?api_key=***``)
  are hidden;
- in httpcore's header lists, the value of every header whose name looks secret
  (``Authorization``, ``Cookie``, ``Mcp-Session-Id``, ``X-Api-Key``...) is ``***``.

Every transport opener installs it (HTTP, HTTP+SSE, WebSocket); installing it again does nothing.
The filter applies to the whole process, so a host's own use of httpx is redacted the same way.
"""

from __future__ import annotations

import logging
import re
from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "REDACTED_LOGGERS",
    "RedactingFilter",
    "install_log_redaction",
    "looks_secret_name",
    "redact_log_text",
    "redact_url",
]

REDACTED: Final = "***"

#: The third-party loggers the transports cause to write. A logger's filters apply only to the
#: records it emits itself (not to its children's), so each one is named.
REDACTED_LOGGERS: Final = (
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "trio-websocket",
)

_SECRET_NAME: Final = re.compile(
    r"auth|cookie|token|secret|passw|api[-_]?key|apikey|key|credential|private|session|signature",
    re.IGNORECASE,
)
#: A URL in free text: a scheme, ``://``, then everything up to white space or a quote.
_URL_IN_TEXT: Final = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
#: One header of httpcore's lists, ``(b'name', b'value')`` (either quote, as ``repr`` chose).
_HEADER_PAIR: Final = re.compile(r"\(b(['\"])((?:\\.|(?!\1).)*)\1, b(['\"])((?:\\.|(?!\3).)*)\3\)")


def looks_secret_name(name: str) -> bool:
    """Whether a header or parameter name suggests that its value is a secret."""
    return bool(_SECRET_NAME.search(name))


def redact_url(url: str) -> str:
    """``url`` safe to log: a password in it becomes ``***`` (user information without a
    password, which is then usually a token, becomes ``***`` as a whole), and so does the value
    of every query parameter. Never fails: text that does not parse as a URL keeps nothing after
    ``?`` or ``#``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        userinfo, at, host = netloc.rpartition("@")
        if at:
            user, colon, _ = userinfo.partition(":")
            netloc = f"{user}:{REDACTED}@{host}" if colon else f"{REDACTED}@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode([(key, REDACTED) for key, _ in pairs], safe="*")
            if not pairs:
                query = REDACTED
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        head = re.split(r"[?#]", url, maxsplit=1)[0]
        cut = len(head) < len(url)
        scheme, sep, rest = head.partition("://")
        authority, slash, path = rest.partition("/")
        if sep and "@" in authority:
            head = f"{scheme}://{REDACTED}@{authority.rpartition('@')[2]}{slash}{path}"
        return head + (f"?{REDACTED}" if cut else "")


def _redact_pair(match: re.Match[str]) -> str:
    if not looks_secret_name(match.group(2)):
        return match.group(0)
    quote = match.group(3)
    return f"(b{match.group(1)}{match.group(2)}{match.group(1)}, b{quote}{REDACTED}{quote})"


def redact_log_text(text: str) -> str:
    """``text`` (a log message) with every URL in it passed through :func:`redact_url` and the
    value of every secret-looking header of a ``(b'name', b'value')`` list hidden."""
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text)
    if "(b" in text:
        text = _HEADER_PAIR.sub(_redact_pair, text)
    return text


class RedactingFilter(logging.Filter):
    """A filter that rewrites each record's message through :func:`redact_log_text` (the
    message is formatted with its arguments first; the record then carries the result and no
    arguments). It never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: keep the format
            message, record.args = str(record.msg), None
            record.msg = redact_log_text(message)
            return True
        redacted = redact_log_text(message)
        if redacted != message or record.args:
            record.msg = redacted
            record.args = None
        return True


_FILTER: Final = RedactingFilter("trio_mcp")


def install_log_redaction() -> None:
    """Put the redacting filter on every logger of :data:`REDACTED_LOGGERS` that does not have
    it yet. Idempotent; called by every transport opener."""
    for name in REDACTED_LOGGERS:
        target = logging.getLogger(name)
        if _FILTER not in target.filters:
            target.addFilter(_FILTER)
