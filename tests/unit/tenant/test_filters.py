"""Pure parts of the filtered lists and stats."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tickwork.store.filters import like_prefix
from tickwork.tenant.stats import window


def test_like_prefix_escapes_every_wildcard() -> None:
    assert like_prefix("report") == "report%"
    assert like_prefix("50%_off\\") == "50\\%\\_off\\\\%"


def test_the_stats_window_ends_now() -> None:
    now = datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc)
    assert window(now, 3600) == (now - timedelta(hours=1), now)
