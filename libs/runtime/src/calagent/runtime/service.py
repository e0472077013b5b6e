"""How every service process runs: wire the bus, start the app, stop cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import uvloop
from opentelemetry.trace import TracerProvider

from calagent.runtime.bus import Bus
from calagent.runtime.clock import Clock, clock_from_env
from calagent.runtime.settings import Settings, load_settings
from calagent.runtime.telemetry import exported, setup_tracing, shutdown_tracing

log = logging.getLogger("calagent.service")


class ServiceApp(Protocol):
    name: str

    def wire(self, bus: Bus) -> None:
        """Declare what the service serves, consumes and publishes; no I/O (the AsyncAPI
        document is generated from this alone)."""
        ...

    async def start(self, bus: Bus) -> None:
        """Open what the handlers need (database, model client); no message flows yet."""
        ...

    async def stop(self) -> None: ...


@runtime_checkable
class HealthProbe(Protocol):
    async def health(self) -> dict[str, str]:
        """The state of what the service cannot work without: {"database": "ok" | "down"}."""
        ...


AppFactory = Callable[[Settings, Clock], ServiceApp]


def configure_logging(service: str) -> None:
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s",
    )


async def start_service(
    app: ServiceApp,
    nats_url: str,
    clock: Clock,
    *,
    tracer_provider: TracerProvider | None = None,
    telemetry: bool = True,
    replicas: int = 1,
) -> Bus:
    """Wire `app` on a bus of its own, start it, and only then let messages in."""
    bus = Bus(
        nats_url, app.name, clock, tracer_provider=tracer_provider, telemetry=telemetry, replicas=replicas
    )
    app.wire(bus)
    bus.serve_health(app.health if isinstance(app, HealthProbe) else None)
    try:
        await bus.open()
        await app.start(bus)
        await bus.start()
    except BaseException:
        await bus.close()
        raise
    return bus


async def serve(
    app: ServiceApp,
    settings: Settings,
    clock: Clock,
    stop: asyncio.Event,
    tracer_provider: TracerProvider | None = None,
) -> None:
    bus = await start_service(
        app,
        settings.require_nats(),
        clock,
        tracer_provider=tracer_provider,
        telemetry=exported(settings),
        replicas=settings.nats_replicas,
    )
    log.info("%s started", app.name)
    try:
        await stop.wait()
    finally:
        log.info("%s stopping", app.name)
        await bus.close()
        await app.stop()


def run(factory: AppFactory, service: str) -> None:
    """Entry point of `python -m calagent.<service>`."""
    configure_logging(service)
    settings = load_settings()
    clock = clock_from_env(settings.now)
    provider = setup_tracing(service, settings)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(factory(settings, clock), settings, clock, stop, provider)

    try:
        # uvloop: the services spend most of their CPU in the event loop and its sockets.
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())
    finally:
        shutdown_tracing(provider)
