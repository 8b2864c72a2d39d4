"""Plain text tables for people: a header row, columns padded to their widest cell, long cells cut."""
from __future__ import annotations

from typing import Sequence

MAX_CELL = 60  # an error text or URL wider than this is cut with "…"


def cell(value: object) -> str:
    if value is None:
        return "-"
    text = " ".join(str(value).split())  # one line per row
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…"


def render(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    lines = [headers, *cells]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in lines)


def fields(pairs: Sequence[tuple[str, object]]) -> str:
    """One record as `name: value` lines, names aligned; a value of several lines keeps to its column."""
    width = max(len(name) for name, _ in pairs) + 1
    indent = "\n" + " " * (width + 1)
    lines = []
    for name, value in pairs:
        text = "-" if value is None else str(value)
        lines.append(f"{name + ':':<{width}} {indent.join(text.splitlines()) or text}")
    return "\n".join(lines)
