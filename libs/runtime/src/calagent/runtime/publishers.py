"""Typed publishers: what `Bus.stream_publisher` and `Bus.topic_publisher` hand a sender, so a
message and its subject's declared type cannot disagree."""

from __future__ import annotations

from typing import Generic, TypeVar

from faststream.nats import PubAck
from faststream.nats.publisher.usecase import LogicPublisher
from pydantic import BaseModel

from calagent.contracts.wire import Stream, Topic

M = TypeVar("M", bound=BaseModel)


class StreamPublisher(Generic[M]):
    """Publishes one JetStream subject's messages; `msg_id` makes a retry a no-op within the
    stream's duplicate window, and the returned ack says whether it was one."""

    def __init__(self, publisher: LogicPublisher, stream: Stream[M]) -> None:
        self._publisher = publisher
        self._stream = stream

    async def publish(self, message: M, *, msg_id: str | None = None, timeout: float = 10.0) -> PubAck:
        headers = {"Nats-Msg-Id": msg_id} if msg_id else None
        ack: PubAck = await self._publisher.publish(
            message, headers=headers, stream=self._stream.stream, timeout=timeout
        )
        return ack


class TopicPublisher(Generic[M]):
    """Publishes one topic's messages to `<prefix>.<key>`."""

    def __init__(self, publisher: LogicPublisher, topic: Topic[M]) -> None:
        self._publisher = publisher
        self._topic = topic

    async def publish(self, key: str, message: M) -> None:
        await self._publisher.publish(message, subject=self._topic.subject(key))
