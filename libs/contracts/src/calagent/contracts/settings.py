"""A user's settings and free/busy sharing (contract §16, §18).

Settings: the user's time zone (the zone of their turns, winning over the token's claim), their
address (a contact with it is this user), the language they read, their working hours per
weekday, whose invitations are offered (§19: everyone's, or only the user's own address's and
their contacts'), and the free time a suggestion keeps around each of their busy spans (§20).
Sharing: an owner lets another user of this deployment see when they are busy — busy spans only, never what fills them.

The gateway's `/v1/settings` and `/v1/sharing` routes validate with the models below and ask
commands over `calagent.people.manage`; commands owns the tables. Validation lives here, once:
the HTTP body and the bus message are the same model.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, time
from typing import Annotated, Any, Final, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, StrictInt, StrictStr, field_validator

from calagent.contracts.address import EMAIL_MAX, is_address
from calagent.contracts.base import WireModel
from calagent.contracts.envelope import Envelope

# Monday first, as ISO weekdays are numbered (mon = 1 … sun = 7).
WEEKDAY_KEYS: Final = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
WeekdayKey = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
Language = Literal["zh", "en"]
SharingLevel = Literal["freebusy"]
# Whose invitations received by mail are offered (contract §19): everyone's, a stranger's marked
# as such (the default), or only known senders' (a stranger's is put on record, not offered).
InvitationsFrom = Literal["known", "everyone"]
DEFAULT_INVITATIONS_FROM: Final[InvitationsFrom] = "everyone"
# The names `PUT /v1/settings` takes, one home for the gateway's check and the bus message.
SettingsField = Literal["tz", "email", "language", "work_hours", "invitations_from", "buffer_minutes"]
SETTINGS_FIELDS: Final[tuple[SettingsField, ...]] = get_args(SettingsField)
USER_ID_MAX = 128
ZONE_MAX = 64
# The zone of a user whose token names none and who saved none, unless the deployment names
# another (CALAGENT_DEFAULT_TZ).
DEFAULT_ZONE: Final = "Asia/Shanghai"
# A user id as a key or a subject token (the `USER_ZONES_BUCKET` key-value bucket, the quota
# counters, the outbox wake): a digest, since a user id may hold characters a key may not.
USER_KEY_CHARS = 32

# (start, end) as "HH:MM"; a day that is absent or null is a day off.
WorkHours = dict[WeekdayKey, tuple[str, str]]
# The most free time kept around a busy span: four hours, more than any travel between meetings.
BUFFER_MINUTES_MAX = 240


def parse_clock(value: str) -> time:
    """`HH:MM`, 24-hour, two digits each ("24:00" is not a time of day)."""
    if len(value) != 5 or value[2] != ":" or not (value[:2].isdigit() and value[3:].isdigit()):
        raise ValueError(f"{value!r} is not a HH:MM time")
    hours, minutes = int(value[:2]), int(value[3:])
    if hours > 23 or minutes > 59:
        raise ValueError(f"{value!r} is not a time of day")
    return time(hours, minutes)


def valid_zone_name(name: str) -> bool:
    if not name or len(name) > ZONE_MAX or name != name.strip():
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def check_work_hours(value: Any) -> WorkHours:
    """`{"mon": ["09:00", "18:00"], …}`: keys mon..sun, each [start, end] with end after start, or
    null for a day off. Anything else is refused with the reason."""
    if not isinstance(value, dict):
        raise ValueError('work_hours is an object like {"mon": ["09:00", "18:00"]}')
    hours: WorkHours = {}
    for key, span in value.items():
        if key not in WEEKDAY_KEYS:
            raise ValueError(f"work_hours: {key!r} is not one of {', '.join(WEEKDAY_KEYS)}")
        if span is None:
            continue
        if not (isinstance(span, list | tuple) and len(span) == 2 and all(isinstance(s, str) for s in span)):
            raise ValueError(f'work_hours.{key} is ["HH:MM", "HH:MM"] or null for a day off')
        start, end = parse_clock(span[0]), parse_clock(span[1])
        if end <= start:
            raise ValueError(f"work_hours.{key}: the end must be after the start")
        hours[key] = (span[0], span[1])
    return {k: hours[k] for k in WEEKDAY_KEYS if k in hours}


def default_work_hours(span: tuple[time, time]) -> WorkHours:
    """Monday to Friday in `span` (the deployment's CALAGENT_WORKING_HOURS); weekends off."""
    clock = (span[0].strftime("%H:%M"), span[1].strftime("%H:%M"))
    return dict.fromkeys(WEEKDAY_KEYS[:5], clock)


def user_key(user_id: str) -> str:
    return hashlib.sha256(user_id.encode()).hexdigest()[:USER_KEY_CHARS]


class SettingsPatch(WireModel):
    """`PUT /v1/settings`: only the fields present change; null clears one (tz: back to the
    token's zone; email and language: none; work_hours: back to the deployment's;
    invitations_from: everyone; buffer_minutes: 0)."""

    tz: StrictStr | None = None
    email: StrictStr | None = Field(default=None, max_length=EMAIL_MAX)
    language: Language | None = None
    work_hours: WorkHours | None = None
    invitations_from: InvitationsFrom | None = None
    buffer_minutes: StrictInt | None = Field(default=None, ge=0, le=BUFFER_MINUTES_MAX)

    @field_validator("tz")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is not None and not valid_zone_name(value):
            raise ValueError(f"{value!r} is not an IANA time zone (e.g. Asia/Shanghai)")
        return value

    @field_validator("email")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None and not is_address(value):
            raise ValueError(f"{value!r} is not an e-mail address")
        return None if value is None else value.strip().removeprefix("mailto:")

    @field_validator("work_hours", mode="before")
    @classmethod
    def _hours(cls, value: Any) -> Any:
        return None if value is None else check_work_hours(value)


class SettingsOut(WireModel):
    tz: str
    email: str | None = None
    language: Language | None = None
    work_hours: WorkHours
    invitations_from: InvitationsFrom = DEFAULT_INVITATIONS_FROM
    buffer_minutes: int = 0
    # Whether the zone is the user's own choice (else the token's, or the deployment's default).
    tz_saved: bool = False


class ShareEntry(WireModel):
    user: str
    level: SharingLevel = "freebusy"
    created_at: datetime


class SharingOut(WireModel):
    # Whom the caller shares their free/busy with, and who shares theirs with the caller.
    shared_with: tuple[ShareEntry, ...] = ()
    shared_with_me: tuple[ShareEntry, ...] = ()


class GetSettings(WireModel):
    kind: Literal["get_settings"] = "get_settings"
    envelope: Envelope


class PutSettings(WireModel):
    kind: Literal["put_settings"] = "put_settings"
    envelope: Envelope
    patch: SettingsPatch
    # The names of the fields the client sent (a field sent as null clears it; one not sent stays).
    fields: tuple[SettingsField, ...]


class Share(WireModel):
    """The caller shares their free/busy with `with_user`."""

    kind: Literal["share"] = "share"
    envelope: Envelope
    with_user: Annotated[str, Field(min_length=1, max_length=USER_ID_MAX)]
    level: SharingLevel = "freebusy"


class Unshare(WireModel):
    kind: Literal["unshare"] = "unshare"
    envelope: Envelope
    with_user: Annotated[str, Field(min_length=1, max_length=USER_ID_MAX)]


class ListSharing(WireModel):
    kind: Literal["list_sharing"] = "list_sharing"
    envelope: Envelope


AnySettingsCommand = GetSettings | PutSettings | Share | Unshare | ListSharing


class ZoneEntry(WireModel):
    """The value of a user's key in the zones bucket: what the gateway needs before a turn."""

    tz: str
