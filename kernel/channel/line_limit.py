"""How long one output line may be on the channel, and how a longer one is cut: visibly.

Shared by both ends: a rank cuts what it sends, the kernel cuts what it keeps (whatever a
rank sent). Only standard library.
"""

from __future__ import annotations

MAX_LINE_CHARS = 64 * 1024


def cut_line(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """``line`` if it has at most ``limit`` characters, else its first ``limit`` characters
    followed by `` [... N bytes cut]`` (N: the UTF-8 bytes left out)."""
    if len(line) <= limit:
        return line
    cut = len(line[limit:].encode("utf-8", errors="replace"))
    return f"{line[:limit]} [... {cut} bytes cut]"
