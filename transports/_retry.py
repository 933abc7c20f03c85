"""Rate limiting: a server that answers ``429 Too Many Requests`` with ``Retry-After``.

A request answered 429 was not processed, so sending it again is safe. The HTTP transports (and
the WebSocket opener, for a handshake answered 429) wait for what ``Retry-After`` asks (seconds,
or an HTTP date) and send it again, as long as the waits of one request add up to no more than
its bound: ``max_retry_after`` (60 s by default) and, when the request has one, what is left of
its own time (the call's timeout, or ``connect_timeout`` for connecting and ``initialize``),
whichever is smaller. A wait that would go past it fails the request at once, with the server's
answer, the wait it asked for and the bound. A 429 without a usable ``Retry-After`` fails the
request at once, as any error status does.
"""

from __future__ import annotations

import datetime
import email.utils
import math
import time
from typing import Final

__all__ = ["DEFAULT_MAX_RETRY_AFTER", "retry_after_seconds", "too_long_to_wait", "wall_clock"]

#: The most one request waits, in all, for a server that answers 429 with Retry-After.
DEFAULT_MAX_RETRY_AFTER: Final = 60.0
#: More digits than this is no number of seconds anyone means (and ``int()`` refuses very long
#: strings): it is taken as forever.
_MAX_DIGITS: Final = 12


def wall_clock() -> float:
    """The time of day, in seconds since the epoch (what an HTTP date is compared with)."""
    return time.time()


def retry_after_seconds(value: str | None, *, now: float) -> float | None:
    """The seconds a ``Retry-After`` header value asks to wait, counted from ``now`` (the time of
    day, for the HTTP-date form): a number of seconds, or a date (a date in the past is 0).
    None when there is no value or it is neither form."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return math.inf if len(text) > _MAX_DIGITS else float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC, as RFC 5322 says for a date of unknown zone
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - now)


def too_long_to_wait(refusal: str, delay: float, limit: float) -> str:
    """The message of a request whose server asked for a longer wait than the request has:
    ``refusal`` is the server's answer (``POST tools/call to ...: the server answered HTTP
    429 ...``)."""
    asked = "a wait without end" if math.isinf(delay) else f"{delay:g} s"
    return (
        f"{refusal}; it asked to retry after {asked} (Retry-After), more than this request may "
        f"still wait ({max(limit, 0.0):g} s: max_retry_after, or what is left of its timeout); "
        "the request was not processed: try again later"
    )
