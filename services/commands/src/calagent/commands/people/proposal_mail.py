"""The one mail a proposal of times sends its attendee (contract §20): plain text, no iCalendar
method (RFC 5546 has none for "which of these?", and a REQUEST per slot would put every slot in
their calendar), from the user's private address so the answer comes back to the assistant.

Each slot is written in the attendee's zone when it is known, that zone named, and in the user's
own zone, named too; numbered in time order, the number being the easiest answer. The Message-ID
is the proposal's own: a reply names it (In-Reply-To, References), and a retry of the outbox
sends the same message.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, formataddr
from zoneinfo import ZoneInfo

from calagent.contracts.people import ProposalOut, ProposedSlot

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def message_id(proposal_id: str, domain: str) -> str:
    return f"<proposal-{proposal_id}@{domain}>"


def _day(moment: datetime) -> str:
    return f"{_DAYS[moment.weekday()]} {moment.day} {_MONTHS[moment.month - 1]} {moment.year}"


def span_in(slot: ProposedSlot, tz: ZoneInfo) -> str:
    """ "Tue 29 Sep 2026, 09:00–10:00 (Europe/Berlin)": a slot on the wall clock of `tz`."""
    start, end = slot.start.astimezone(tz), slot.end.astimezone(tz)
    until = f"{end:%H:%M}" if end.date() == start.date() else f"{_day(end)} {end:%H:%M}"
    return f"{_day(start)}, {start:%H:%M}–{until} ({tz.key})"


def slot_lines(slots: Sequence[ProposedSlot], theirs: ZoneInfo | None, mine: ZoneInfo) -> list[str]:
    """One numbered line per slot: in their zone (when known) and in the user's."""
    lines = []
    for number, slot in enumerate(slots, start=1):
        shown = [span_in(slot, theirs)] if theirs is not None and theirs.key != mine.key else []
        shown.append(span_in(slot, mine))
        lines.append(f"{number}. " + " = ".join(shown))
    return lines


def render(
    proposal: ProposalOut,
    *,
    sender: str,
    msg_id: str,
    stamp: datetime,
    mine: ZoneInfo,
    lang: str | None,
) -> str:
    theirs = ZoneInfo(proposal.attendee_tz) if proposal.attendee_tz else None
    intro = [f"{proposal.title}", ""]
    if lang == "zh":
        intro.append("以下哪个时间方便？回复编号（或星期几）即可。")
    intro.append("Which of these times suits you? Reply with its number (or the day).")
    if theirs is None:
        intro.append(f"(Your time zone is not known to me: the times are in {mine.key}.)")
    body = [*intro, "", *slot_lines(proposal.slots, theirs, mine), ""]
    message = EmailMessage(policy=SMTP)
    message["From"] = sender
    message["To"] = formataddr((proposal.attendee.name or "", proposal.attendee.email))
    message["Subject"] = f"Proposed times: {proposal.title}"
    message["Date"] = format_datetime(stamp.astimezone(UTC))
    message["Message-ID"] = msg_id
    message.set_content("\n".join(body))
    return message.as_string()
