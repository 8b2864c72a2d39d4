"""An ASGI application for uvicorn: `uvicorn tests.interop.apps.asgi_target:app` (arrivals go to the file
named by $INTEROP_ARRIVALS)."""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from tests.interop.shapes import BODY, SLOW_FIRST_BYTE_SECONDS, log_arrival, shape_of

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    while (await receive()).get("more_body"):
        pass
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
    log_arrival(scope["path"], scope["server"][1], headers)
    shape = shape_of(scope["path"])
    if shape == "slow":
        await asyncio.sleep(SLOW_FIRST_BYTE_SECONDS)
    if shape == "chunked":  # no length: uvicorn frames the streamed parts as chunks
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": BODY[:1], "more_body": True})
        await send({"type": "http.response.body", "body": BODY[1:]})
        return
    status, body = (304, b"") if shape == "304" else (200, BODY)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
