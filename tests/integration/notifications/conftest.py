"""What the notification tests share: a second HTTP target, the receiver of the jobs' `notify.url`."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.conftest import Target


@pytest.fixture
def notify_target() -> Iterator[Target]:
    server = Target()
    yield server
    server.close()
