"""Container healthcheck: `python healthcheck.py <service>` exits 0 when the service answers.

The gateway is asked over HTTP (`/healthz`, 200 only once all five services answer); the others
over the bus on `calagent.health.<service>`. Replicas share that subject through a queue group, so
the bus probe proves the service answers, not that this replica does; a replica whose process
dies ends its container anyway, and compose restarts it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import urllib.request

import nats

from calagent.contracts import subjects
from calagent.runtime.trust import inbox_prefix, user_of

TIMEOUT_S = 3.0


def http_ok(port: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=TIMEOUT_S) as response:
            return bool(response.status == 200)
    except OSError:
        return False


async def bus_ok(service: str) -> bool:
    url = os.environ.get("NATS_URL", "nats://nats:4222")
    user = user_of(url)
    try:
        nc = await nats.connect(
            servers=[server.strip() for server in url.split(",")],
            # The service's own NATS user reads replies only under its own inbox prefix.
            inbox_prefix=inbox_prefix(user) if user else "_INBOX",
            connect_timeout=TIMEOUT_S,
            allow_reconnect=False,
        )
    except Exception:
        return False
    try:
        await nc.request(subjects.health(service), b"{}", timeout=TIMEOUT_S)
    except Exception:
        return False
    finally:
        await nc.close()
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in subjects.SERVICES:
        print(f"usage: healthcheck.py {{{'|'.join(subjects.SERVICES)}}}", file=sys.stderr)
        return 2
    service = argv[1]
    if service == "gateway":
        healthy = http_ok(os.environ.get("CALAGENT_HTTP_PORT", "8080"))
    else:
        healthy = asyncio.run(bus_ok(service))
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
