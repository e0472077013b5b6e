"""The envelope every turn-scoped message carries.

Identity travels here and only here: the gateway sets `user_id` from the verified token, and no
tool argument or command field can name a user.
"""

from datetime import datetime
from typing import Literal

from pydantic import Field

from calagent.contracts.base import WireModel

Channel = Literal["web", "telegram", "email", "api"]


class Envelope(WireModel):
    turn_id: str = Field(min_length=1, max_length=64)
    user_id: str = Field(min_length=1, max_length=128)
    conversation_id: str = Field(min_length=1, max_length=128)
    occurred_at: datetime
    tz: str = Field(min_length=1, max_length=64, description="the user's IANA time zone")
    channel: Channel = "web"
    # The language the user reads, when the door knows it (the page's own language); None: read
    # from their words. Names a new user's calendars and a receipt of a turn without words.
    lang: Literal["zh", "en"] | None = None
    trace_headers: dict[str, str] = Field(default_factory=dict)
