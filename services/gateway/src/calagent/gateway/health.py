"""`GET /healthz`: every service with what it answered, and the dependencies that are down."""

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from calagent.contracts import subjects, wire
from calagent.contracts.bus import HealthCheck
from calagent.gateway.state import CurrentGateway

SERVICE = "gateway"
# Above the services' own database probe (1 s), so a slow database reads as down, not missing.
HEALTH_TIMEOUT_S = 2.0


def health_router() -> APIRouter:
    router = APIRouter()

    @router.get("/healthz")
    async def healthz(gw: CurrentGateway) -> JSONResponse:
        """Every service named with what it answered ("ok", "degraded": it answers but a dependency
        it needs is down, "missing": no replica answers), and the dependencies by name, so a
        database or bus outage shows here instead of only as failing turns."""
        others = [s for s in subjects.SERVICES if s != SERVICE]
        dependencies: dict[str, str] = {"bus": "ok" if gw.bus_connected else "down"}

        async def ask(service: str) -> str:
            try:
                reply = await gw.bus.request(wire.health(service), HealthCheck(), timeout=HEALTH_TIMEOUT_S)
            except Exception:
                return "missing"
            for name, state in reply.dependencies.items():
                if state != "ok" or name not in dependencies:
                    dependencies[name] = state
            return reply.status

        answers = await asyncio.gather(*(ask(s) for s in others))
        services = {SERVICE: "ok", **dict(zip(others, answers, strict=True))}
        healthy = all(v == "ok" for v in services.values()) and all(v == "ok" for v in dependencies.values())
        return JSONResponse(
            {"status": "ok" if healthy else "degraded", "services": services, "dependencies": dependencies},
            status_code=200 if healthy else 503,
        )

    return router
