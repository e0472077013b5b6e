"""Who reads a reply written by code (a receipt, an offer, a read): their zone, their language
and their today, and each fact as that reader sees it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from calagent.contracts.commands import EventOut
from calagent.contracts.display import Lang, format_day, format_moment, format_span
from calagent.contracts.people import Attendee


@dataclass(frozen=True)
class View:
    """Who reads the receipt: their zone, their language, and their today (for the year).

    Times are shown in the reader's own zone, so a receipt names no zone (contract §18: a time
    carries its zone only when it differs from the user's); `spell_zone` is set for a reader who
    needs it spelled out whatever it is (the model, in tool results)."""

    tz: str
    lang: Lang
    today: date
    spell_zone: bool = False

    @classmethod
    def at(cls, moment: datetime, tz: str, lang: Lang) -> View:
        try:
            today = moment.astimezone(ZoneInfo(tz)).date()
        except (ZoneInfoNotFoundError, ValueError):
            # An unknown zone is refused by commands with a clear error; the receipt still renders.
            today = moment.date()
        return cls(tz, lang, today)

    def for_model(self) -> View:
        return View(self.tz, self.lang, self.today, spell_zone=True)

    @property
    def zone_label(self) -> str | None:
        return self.tz if self.spell_zone else None

    @property
    def zh(self) -> bool:
        return self.lang == "zh"

    def local(self, at: datetime) -> datetime:
        return at.astimezone(ZoneInfo(self.tz))

    def span(self, start: datetime, end: datetime, all_day: bool = False) -> str:
        return format_span(
            self.local(start), self.local(end), self.zone_label, self.lang, all_day, self.today
        )

    def day(self, day: date) -> str:
        return format_day(day, self.lang, self.today)

    def moment(self, at: datetime) -> str:
        return format_moment(self.local(at), self.zone_label, self.lang, self.today)

    def when(self, event: EventOut) -> str:
        return self.span(event.start, event.end, event.all_day)

    def listing(self, items: Iterable[str]) -> str:
        """Items in a row, with the language's list separator."""
        return ("、" if self.zh else ", ").join(items)

    def people(self, people: Sequence[Attendee]) -> str:
        return self.listing(f"{p.name} <{p.email}>" if p.name else p.email for p in people)
