"""Text from a driver or a file, made safe for a terminal, a log or a report.

A driver's exception message (or a value in a hostile spec file) can hold ANSI escape
sequences (colours, cursor moves, window titles, hyperlinks, even terminal queries) or other
control characters; printed raw they rewrite what an engineer sees.  It can also be a
megabyte long.  ``clean_text`` removes the escapes and controls and keeps newlines and tabs;
``shorten`` bounds a length; ``show`` is a bounded ``repr`` for error messages that never
builds the full repr of a huge value.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

# 7-bit and 8-bit forms: CSI (ESC [ / 0x9b ... final byte); OSC, DCS, SOS, PM, APC strings
# (ESC ] P X ^ _ / 0x9d 0x90 0x98 0x9e 0x9f ... up to BEL or ST, or the end of the text);
# any other two-byte ESC sequence.  Then every C0/C1 control character except \t and \n.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

ELLIPSIS = "..."


def clean_text(s: str) -> str:
    """``s`` without escape sequences and control characters (newline and tab kept)."""
    if not isinstance(s, str):
        s = str(s)
    return _CONTROL.sub("", _ESCAPES.sub("", s))


def shorten(s: str, limit: int) -> str:
    """``s`` cut to at most ``limit`` characters, ending in ``...`` when cut."""
    if len(s) <= limit:
        return s
    return s[: max(limit - len(ELLIPSIS), 0)] + ELLIPSIS


class _BoundedRepr(reprlib.Repr):
    """reprlib with no full repr of a huge int (int -> str of >4300 digits raises)."""

    def repr_int(self, x: int, level: int) -> str:
        bits = abs(x).bit_length()
        if bits > 256:
            return f"<integer of about {int(bits * 0.30103) + 1} digits>"
        return super().repr_int(x, level)


_REPR = _BoundedRepr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict = 3, 8, 8, 4
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 120, 120, 60


def show(x: Any, limit: int = 60) -> str:
    """A one-line repr of ``x`` for an error message, at most ``limit`` characters."""
    return shorten(clean_text(_REPR.repr(x)), limit)


__all__ = ["clean_text", "shorten", "show"]
