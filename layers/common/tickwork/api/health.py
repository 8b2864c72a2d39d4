"""GET /health, for load balancers and uptime checks: no key, answered within about a second."""
from __future__ import annotations

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router

from tickwork import __version__
from tickwork.api.responses import HealthOut
from tickwork.dispatch.health import Health, Prober
from tickwork.wiring import services

router = Router()
_prober = Prober()


@router.get("/health", summary="Whether Postgres, Redis and the poller are working (no key needed)", tags=["health"],
            security=[{}], responses={200: {"description": "Everything works"},
                                    503: {"description": "A store does not answer, or the poller stopped ticking",
                                          "content": {"application/json": {"model": HealthOut}}}})
def get_health() -> Response[HealthOut]:
    svc = services()
    health = _prober.check(svc.db, svc.index, int(svc.clock() * 1000))
    return Response(status_code=200 if health.ok else 503, content_type=content_types.APPLICATION_JSON,
                    body=health_out(health).model_dump(), headers={"Cache-Control": "no-store"})  # type: ignore[arg-type]  # Response[Model] names the model for the OpenAPI document; the body is it dumped


def health_out(health: Health) -> HealthOut:
    return HealthOut.model_validate({
        "status": "ok" if health.ok else "degraded", "postgres": health.postgres, "redis": health.redis,
        "last_tick_age_seconds": health.last_tick_age_seconds, "version": __version__,
    })
