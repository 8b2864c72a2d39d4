"""An aiohttp web.Application: `python -m tests.interop.apps.aiohttp_target PORT` (arrivals go to the file
named by $INTEROP_ARRIVALS)."""
from __future__ import annotations

import sys

from aiohttp import web

from tests.interop.shapes import BIG_BODY, BODY, log_arrival, shape_of


async def answer(request: web.Request) -> web.StreamResponse:
    await request.read()
    assert request.transport is not None
    log_arrival(request.path, request.transport.get_extra_info("sockname")[1], request.headers)
    shape = shape_of(request.path)
    if shape == "204":
        return web.Response(status=204)
    if shape == "chunked":
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(BODY)
        await response.write_eof()
        return response
    return web.Response(body=BIG_BODY if shape == "big" else BODY, content_type="text/plain")


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_route("*", "/{shape}", answer)
    return app


if __name__ == "__main__":
    web.run_app(make_app(), host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
