"""Calendars real clients wrote, through the real sync, compared with an independent RFC 5545 reading
(issue 44). The corpus is `tests/e2e/realcalendars.toml`: exports by Outlook, Exchange, Google,
Thunderbird, Nextcloud, DAVx5, Evolution, Cyrus, khal, booking tools, holiday and podcast feeds,
read from where the packages this project already depends on ship them (see that file for each
one's source and licence). Each file is split into one object per UID (as a client's import
does), stored on Radicale or Xandikos as sent, synced, and `GET /v1/events` over two years is
compared with recurring-ical-events' reading of the objects the server kept: title, start and end
in UTC (all-day as dates). A UID whose occurrences differ must be named in `GET /v1/accounts` with
why. `make test` runs a sample; `make realcalendars` all of them on both servers.
"""

# ruff: noqa: F811
from __future__ import annotations

import os
import tomllib
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from importlib.resources import files
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import recurring_ical_events  # type: ignore[import-untyped]
from icalendar import Calendar, Component

from calagent.cli.stack import Stack
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar
from calagent.devtools.testing.xandikos import EmbeddedXandikos

from .test_caldav import Remote, connect
from .test_sync_faults import radicale, stack, sync_now  # noqa: F401 - radicale, stack: fixtures

pytestmark = pytest.mark.e2e

MANIFEST = tomllib.loads((Path(__file__).parent / "realcalendars.toml").read_text())
ALL = os.environ.get("CALAGENT_REAL_CALENDARS") == "all"
CASES = [
    (name, server)
    for name, entry in MANIFEST["calendar"].items()
    if ALL or entry.get("sample", False)
    for server in (("xandikos", "radicale") if ALL and entry.get("radicale", True) else ("xandikos",))
]
# The user's zone (the stack's default): floating times and all-day dates are read in it.
ZONE = ZoneInfo("Asia/Shanghai")
WINDOW = timedelta(days=365)  # GET /v1/events answers at most 366 days at once
NO_UID = "(no UID)"


def corpus_file(name: str) -> str:
    entry = MANIFEST["calendar"][name]
    return str((files(entry["package"]) / entry["path"]).read_text(encoding="utf-8"))


def objects_of(text: str) -> dict[str, str]:
    """The file as a client's import stores it: one object per UID, each with the file's zones."""
    cal = Calendar.from_ical(text)
    zones = list(cal.walk("VTIMEZONE"))
    by_uid: dict[str, list[Component]] = defaultdict(list)
    for n, component in enumerate(cal.walk("VEVENT")):
        by_uid[str(component["UID"]) if "UID" in component else f"{NO_UID}{n}"].append(component)
    out = {}
    for uid, components in by_uid.items():
        one = Calendar()
        one.add("VERSION", "2.0")
        one.add("PRODID", cal.get("PRODID", "-//unknown//EN"))
        for component in [*zones, *components]:
            one.add_component(component)
        out[uid] = one.to_ical().decode()
    return out


@dataclass(frozen=True)
class Shown:
    title: str
    start: datetime | date  # a UTC datetime, or a date for an all-day occurrence
    end: datetime | date


def rfc_reading(
    objects: dict[str, str], lo: datetime, hi: datetime, failed: set[str]
) -> dict[str, set[Shown]]:
    """recurring-ical-events' occurrences per UID; an object it cannot read goes into `failed`.
    A cancelled occurrence is left out: it reads it as an event with STATUS:CANCELLED, which no
    calendar app shows."""
    found: dict[str, set[Shown]] = defaultdict(set)
    for uid, body in objects.items():
        try:
            occurrences = list(recurring_ical_events.of(Calendar.from_ical(body)).between(lo, hi))
        except Exception:  # the reference has limits of its own (RSCALE, an escaped rule)
            failed.add(NO_UID if uid.startswith(NO_UID) else uid)
            continue
        for c in occurrences:
            if str(c.get("STATUS", "")).upper() == "CANCELLED":
                continue
            start = c.decoded("DTSTART")
            end = c.decoded("DTEND") if "DTEND" in c else start + c.decoded("DURATION", timedelta(0))
            if not isinstance(start, datetime) and end == start:
                # RFC 5545 §3.6.1: a DATE start without DTEND or DURATION lasts one day (the
                # reference ends it where it starts).
                end = start + timedelta(days=1)
            found[uid].add(Shown(_title(c.get("SUMMARY")), _at(start), _at(end)))
    return found


def _title(value: object) -> str:
    # Both sides' titles without the spaces around them, which the API does not keep.
    return str(value or "").strip() or "(untitled)"


def _at(value: object) -> datetime | date:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=ZONE)).astimezone(UTC)
    assert isinstance(value, date)
    return value


async def ours(stack: Stack, user: str, lo: datetime, hi: datetime, uids: set[str]) -> dict[str, set[Shown]]:
    response = await stack.client.get(
        "/v1/events", params={"start": lo.isoformat(), "end": hi.isoformat()}, headers=stack.headers(user)
    )
    assert response.status_code == 200, response.text
    found: dict[str, set[Shown]] = defaultdict(set)
    for e in response.json()["events"]:
        start, end = datetime.fromisoformat(e["start"]), datetime.fromisoformat(e["end"])
        # An object without a UID is known by one the sync gave it: pooled with the file's others.
        uid = e["uid"] if e["uid"] in uids else NO_UID
        if e["all_day"]:
            found[uid].add(
                Shown(_title(e["title"]), start.astimezone(ZONE).date(), end.astimezone(ZONE).date())
            )
        else:
            found[uid].add(Shown(_title(e["title"]), start.astimezone(UTC), end.astimezone(UTC)))
    return found


def first_day(objects: dict[str, str]) -> datetime:
    """Local midnight of the first day any object starts on: windows from there cut no all-day
    occurrence in two (the RFC reading takes a date as a day of the window's zone)."""
    starts = [
        _at(c.decoded("DTSTART"))
        for body in objects.values()
        for c in Calendar.from_ical(body).walk("VEVENT")
        if "DTSTART" in c and not isinstance(c["DTSTART"], list)
    ]
    days = [s.astimezone(ZONE).date() if isinstance(s, datetime) else s for s in starts]
    return datetime.combine(min(days, default=date(2026, 1, 1)), time(), tzinfo=ZONE)


def store(remote: Remote, objects: dict[str, str]) -> dict[str, str]:
    """The objects the server keeps (Radicale refuses some at PUT: they never reach a sync)."""
    kept = {}
    with remote.client() as client:
        for n, (uid, body) in enumerate(objects.items()):
            response = client.put(
                f"{remote.calendar_url}obj-{n}.ics", body, {"Content-Type": "text/calendar"}
            )
            if response.status in (201, 204):
                kept[uid] = body
    return kept


@pytest.fixture
def server_remote(
    request: pytest.FixtureRequest, radicale: EmbeddedRadicale, tmp_path: Path
) -> Iterator[Remote]:
    kind = request.node.callspec.params["server"]
    if kind == "radicale":
        name, password = f"c{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:10]}"
        radicale.add_user(name, password)
        yield Remote(
            radicale.user_url(name), name, password, make_calendar(radicale.url, name, password, "Personal")
        )
        return
    server = EmbeddedXandikos(tmp_path / "xandikos")
    server.start()
    try:
        yield Remote(server.url, "anyone", "any-password", server.calendar_url)
    finally:
        server.stop()


@pytest.mark.parametrize(("name", "server"), CASES)
async def test_a_real_clients_calendar_shows_what_the_rfc_reading_does_or_names_why_not(
    stack: Stack, user: str, server_remote: Remote, name: str, server: str
) -> None:
    objects = objects_of(corpus_file(name))
    account = await connect(stack, user, server_remote)
    kept = store(server_remote, objects)
    assert kept, f"{server} kept none of {name}'s objects"
    await sync_now(stack, account["id"])

    response = await stack.client.get("/v1/accounts", headers=stack.headers(user))
    [shown] = response.json()["accounts"]
    assert shown["last_error"] is None, shown["last_error"]
    named: dict[str, Any] = {w["uid"]: w["problem"] for w in shown["warnings"] if w.get("uid")}
    # Where the independent reading is itself in doubt, the manifest says why (never silently).
    explained = MANIFEST["calendar"][name].get("differs", {})
    lo = first_day(kept)
    differ: dict[str, tuple[set[Shown], set[Shown]]] = {}
    failed: set[str] = set()
    seen: set[str] = set()
    for window in range(2):
        a, b = lo + window * WINDOW, lo + (window + 1) * WINDOW
        theirs = _pooled(rfc_reading(kept, a, b, failed))
        mine = await ours(stack, user, a, b, set(kept))
        seen |= set(mine)
        for uid in (set(theirs) | set(mine)) - failed:
            if theirs.get(uid, set()) != mine.get(uid, set()):
                differ[uid] = (theirs.get(uid, set()), mine.get(uid, set()))
    unexplained = {uid: d for uid, d in differ.items() if uid not in named and uid not in explained}
    assert not unexplained, _explain(unexplained)
    # What the reference could not read is still shown here, or named.
    assert all(uid in seen or uid in named for uid in failed), (failed, seen, named)
    print(
        f"{name} on {server}: {len(kept)} objects, named {sorted(set(named.values()))}, reference failed {len(failed)}"
    )


def _pooled(found: dict[str, set[Shown]]) -> dict[str, set[Shown]]:
    out: dict[str, set[Shown]] = defaultdict(set)
    for uid, shown in found.items():
        out[NO_UID if uid.startswith(NO_UID) else uid] |= shown
    return out


def _explain(differ: dict[str, tuple[set[Shown], set[Shown]]]) -> str:
    lines = []
    for uid, (theirs, mine) in sorted(differ.items())[:5]:
        lines.append(f"{uid}: RFC reading only {sorted(map(str, theirs - mine))[:4]}")
        lines.append(f"{' ' * len(uid)}  ours only        {sorted(map(str, mine - theirs))[:4]}")
    return "occurrences differ and the account names no reason:\n" + "\n".join(lines)
