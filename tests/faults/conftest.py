"""The fault tests' target: each test runs against a keep-alive target and against Python's stock
http.server (HTTP/1.0, a body ended by the close), which servers people run behave like."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.conftest import Target


@pytest.fixture(params=["keep-alive", "http.server"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    server = Target(stock=request.param == "http.server")
    yield server
    server.close()
