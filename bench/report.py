"""The machine, the results table (Tickwork and the baseline side by side), and the doc section."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any, Callable

import psycopg
import redis

from bench.harness import Servers

DOC_START = "<!-- bench:results:start -->"
DOC_END = "<!-- bench:results:end -->"
ROOT = Path(__file__).resolve().parent.parent


def machine(servers: Servers) -> dict[str, str]:
    with psycopg.connect(servers.database_url, autocommit=True) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]
        sync = conn.execute("SHOW synchronous_commit").fetchone()[0]
    client = redis.Redis.from_url(servers.redis_url)
    redis_version = client.info("server")["redis_version"]
    client.close()
    return {
        "cpus": str(os.cpu_count()),
        "cpu": _cpu_model(),
        "memory": f"{_mem_total_gib():.0f} GiB",
        "python": platform.python_version(),
        "postgres": f"{pg} (synchronous_commit={sync})",
        "redis": redis_version,
        "commit": _git_commit(),
    }


def _cpu_model() -> str:
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _mem_total_gib() -> float:
    with open("/proc/meminfo") as info:
        for line in info:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    return 0.0


def _git_commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    dirty = git("status", "--porcelain", "--", "layers")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes under layers/" if dirty else "")


# ---------------------------------------------------------------- formatting


def seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"


def ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f} ms" if abs(value) >= 10 else f"{value:.2f} ms"


def lags(summary: dict[str, Any] | None) -> str:
    if not summary or not summary.get("n"):
        return "n/a"
    return " / ".join(ms(summary[k]) for k in ("p50", "p99", "max"))


def ratio(tickwork: float | None, baseline: float | None) -> str:
    """baseline ÷ Tickwork: above 1 means Tickwork took less (time, memory, round trips)."""
    if tickwork is None or baseline is None or tickwork <= 0:
        return "n/a"
    return f"{baseline / tickwork:.1f}x" if baseline / tickwork >= 1 else f"{baseline / tickwork:.2f}x"


def verdict(value: float | None, limit: float, unit: Callable[[float | None], str]) -> str:
    if value is None:
        return f"< {unit(limit)}: not measured"
    return f"< {unit(limit)}: {'met' if value < limit else 'MISSED'}"


def mode(processes: int) -> str:
    """Where the executors (and the baseline's tasks) ran, for a section header."""
    if processes <= 0:
        return "executors in the poller's process"
    return f"executors in {processes} process{'es' if processes > 1 else ''}"


def counts(d: dict[str, Any], statuses: dict[str, int] | None = None) -> str:
    """Delivered / dropped / duplicate; for Tickwork, how many dropped slots Postgres recorded `missed`."""
    dropped = f"{d['dropped']:,}"
    if statuses is not None and d["dropped"]:
        dropped += f" ({statuses.get('missed', 0):,} recorded missed)"
    elif statuses is None and d["dropped"]:
        dropped += " (no record)"
    return f"{d['delivered']:,} / {dropped} / {d['duplicates']:,}"


def lost_verdict(d: dict[str, Any]) -> str:
    clean = d["dropped"] == 0 and d["duplicates"] == 0
    return "0 dropped, 0 duplicate: " + ("met" if clean else "MISSED")


def table(rows: list[tuple[str, ...]]) -> str:
    header = ("measure", "Tickwork", "0cron per-job baseline", "baseline ÷ Tickwork", "target")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = list(row) + [""] * (len(header) - len(row))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plain(rows: list[tuple[str, ...]]) -> str:
    """The same table for a terminal."""
    header = ("measure", "Tickwork", "0cron baseline", "base÷TW", "target")
    cells = [header] + [tuple(list(r) + [""] * (len(header) - len(r))) for r in rows]
    # A section header (a row of one cell) is printed on its own line: it does not widen the first column.
    widths = [max(len(str(row[i])) for row in cells if i or any(row[1:])) for i in range(len(header))]
    out = []
    for row in cells:
        if not any(row[1:]):
            out.append(f"-- {row[0]}")
            continue
        out.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(out)


def write_doc(path: Path, section: str) -> None:
    """Replace the generated section of the doc (between the markers), keeping the prose around it."""
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{DOC_START}\n{DOC_END}\n"
    if DOC_START not in text or DOC_END not in text:
        text = text.rstrip() + f"\n\n{DOC_START}\n{DOC_END}\n"
    before, rest = text.split(DOC_START, 1)
    after = rest.split(DOC_END, 1)[1]
    path.write_text(f"{before}{DOC_START}\n{section.strip()}\n{DOC_END}{after}")
