"""The users' saved zones in a JetStream key-value bucket (contract §16).

The bucket is a read model of commands' `user_settings.tz`: commands writes a user's entry after
the commit that changed it; every gateway replica watches the whole bucket and keeps the entries
in memory, so a turn and an API read get the user's zone without a request to commands. Both sides
open it with the same configuration, so whichever starts first makes it.
"""

from __future__ import annotations

from nats.js.kv import KeyValue

from calagent.contracts import subjects
from calagent.runtime.bus import Bus

BUCKET = subjects.USER_ZONES_BUCKET
DESCRIPTION = "commands: each user's saved time zone (settings), watched by the gateway"


async def open_zones_bucket(bus: Bus) -> KeyValue:
    # Replicated like the streams: a zone must outlive the node that stored it. Never expires.
    return await bus.key_value(BUCKET, description=DESCRIPTION)
