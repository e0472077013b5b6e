"""The NATS permissions (`calagent.runtime.trust`) against what each service really wires.

Two independent things: the grants are derived from the subject table's sides, the wiring is what
each service's `create_app` declares on its bus. A subscription or publisher a service declares
but may not use would fail at run time with a permissions violation; this finds it first.
"""

from __future__ import annotations

import pytest

from calagent.cli.asyncapi import system_buses
from calagent.runtime.bus import Declared
from calagent.runtime.trust import allowed

pytestmark = pytest.mark.unit


def _wiring() -> dict[str, list[Declared]]:
    return {bus.service: bus.declared() for bus in system_buses()}


def test_every_subscription_a_service_wires_is_one_it_may_make() -> None:
    for service, declared in _wiring().items():
        for item in declared:
            if not item.publishes and item.stream is None:
                assert allowed(service, item.subject, publish=False), (service, item.subject)


def test_every_stream_a_service_consumes_is_one_whose_consumer_it_may_drive() -> None:
    consumers = 0
    for service, declared in _wiring().items():
        for item in declared:
            if item.publishes or item.stream is None:
                continue
            consumers += 1
            for subject in (
                f"$JS.API.CONSUMER.INFO.{item.stream}.{item.durable}",
                f"$JS.API.CONSUMER.MSG.NEXT.{item.stream}.{item.durable}",
                f"$JS.ACK.{item.stream}.{item.durable}.1.2.3.4.5",
            ):
                assert allowed(service, subject, publish=True), (service, subject)
    assert consumers == 2  # agent: turns; evalrec: records


def test_every_publisher_a_service_wires_is_one_it_may_publish_on() -> None:
    publishers = 0
    for service, declared in _wiring().items():
        for item in declared:
            if not item.publishes:
                continue
            publishers += 1
            assert allowed(service, item.subject, publish=True), (service, item.subject)
    assert publishers >= 9
