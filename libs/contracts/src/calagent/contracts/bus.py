"""Messages the transport itself sends: error replies, dead letters, health."""

from datetime import datetime
from typing import Literal

from pydantic import Field

from calagent.contracts.base import WireModel

BusErrorCode = Literal["malformed", "transient", "internal", "unavailable"]


class BusError(WireModel):
    code: BusErrorCode
    message: str


class BusErrorReply(WireModel):
    """What a responder sends instead of its result when it could not produce one."""

    bus_error: BusError


class DeadLetter(WireModel):
    service: str
    subject: str
    reason: Literal["malformed", "exhausted"]
    error: str
    payload: str
    deliveries: int = 1
    occurred_at: datetime


class HealthCheck(WireModel):
    """A health request carries nothing: answering at all is the answer."""


class HealthReply(WireModel):
    service: str
    # "degraded": the replica answers, but a dependency it cannot work without does not.
    status: Literal["ok", "degraded"] = "ok"
    instance: str
    # What the replica depends on and how it found it: {"database": "ok" | "down"}.
    dependencies: dict[str, Literal["ok", "down"]] = Field(default_factory=dict)
