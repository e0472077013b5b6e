"""The streams the system needs, and how many copies each keeps.

`ensure_streams` creates or updates them (every service's bus does on connecting, idempotent);
`ensure_replicas` raises an existing stream, or a KV bucket's, to the cluster's copies
(`CALAGENT_NATS_REPLICAS`) and never lowers one. JetStream administration only: no subscriber,
no publisher.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging

from faststream.nats import JStream, RetentionPolicy, StorageType, StreamConfig
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import StreamInfo
from nats.js.errors import NotFoundError, ServiceUnavailableError

from calagent.contracts import subjects
from calagent.runtime.settle import TransientError

log = logging.getLogger("calagent.bus")

# How long a stream raised to more copies may take to have them (a new raft group, data copied).
RAISE_REPLICAS_TIMEOUT_S = 60.0

STREAM_CONFIGS = (
    StreamConfig(
        name=subjects.TURNS_STREAM,
        subjects=[subjects.TURN_REQUESTED],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=600.0,
        max_age=7 * 24 * 3600.0,
    ),
    StreamConfig(
        name=subjects.RECORDS_STREAM,
        subjects=[subjects.TURN_RECORDED],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=600.0,
    ),
    StreamConfig(
        name=subjects.DEADLETTER_STREAM,
        subjects=[f"{subjects.DEADLETTER_PREFIX}.>"],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        max_age=30 * 24 * 3600.0,
    ),
)


def _copies(info: StreamInfo, replicas: int) -> int:
    # Never fewer than a stream has: a bus started with the default of 1 (an operator's CLI, a test
    # harness) must not strip a cluster's streams of their copies. Lowering is an operator's call.
    return max(replicas, info.config.num_replicas or 1)


async def _until_replicated(js: JetStreamContext, stream: str, copies: int) -> None:
    """Wait until a stream just raised to `copies` has them: JetStream moves it to its new peers in
    the background (a new raft group elects a leader), and a consumer or bucket with that many
    copies is refused ("insufficient resources") until it has."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RAISE_REPLICAS_TIMEOUT_S
    while True:
        with contextlib.suppress(NatsTimeoutError, ServiceUnavailableError):
            cluster = (await js.stream_info(stream)).cluster
            if cluster is not None and cluster.leader and len(cluster.replicas or ()) >= copies - 1:
                return
        if loop.time() > deadline:
            raise TransientError(
                f"stream {stream} did not reach {copies} copies in {RAISE_REPLICAS_TIMEOUT_S}s"
            )
        await asyncio.sleep(0.25)


async def ensure_replicas(js: JetStreamContext, stream: str, replicas: int) -> int:
    """Raise an existing `stream` (a KV bucket's, say) to `replicas` copies when it has fewer
    (JetStream copies the data to the new peers); returns the copies it will have."""
    try:
        info = await js.stream_info(stream)
    except NotFoundError:
        return replicas
    copies = _copies(info, replicas)
    if copies != (info.config.num_replicas or 1):
        await js.update_stream(dataclasses.replace(info.config, num_replicas=copies))
        log.warning("stream %s raised to %s copies", stream, copies)
        await _until_replicated(js, stream, copies)
    return copies


async def ensure_streams(js: JetStreamContext, replicas: int = 1) -> dict[str, int]:
    """Create or update the streams the system needs with `replicas` copies each (one per cluster
    node, `CALAGENT_NATS_REPLICAS`; an existing stream with fewer is raised); idempotent, safe from
    every replica. Returns the copies each stream has."""
    copies: dict[str, int] = {}
    for config in STREAM_CONFIGS:
        name = config.name or ""
        copies[name] = await ensure_replicas(js, name, replicas)
        wanted = dataclasses.replace(config, num_replicas=copies[name])
        try:
            await js.update_stream(wanted)
        except NotFoundError:
            await js.add_stream(wanted)
    return copies


def jstream(name: str) -> JStream:
    # Declared by `ensure_streams` with their full configuration, not by FastStream from the
    # subjects its subscribers happen to name.
    return JStream(name, declare=False)
