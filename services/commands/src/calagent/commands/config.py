"""The commands service's settings, read from the environment once and handed as one value to
every room that needs one of them (no room repacks them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import time, timedelta

from calagent.commands.domain.calendars import NewCalendars
from calagent.commands.domain.freetime import parse_working_hours
from calagent.contracts.settings import DEFAULT_ZONE
from calagent.runtime.settings import Settings


@dataclass(frozen=True)
class CommandConfig:
    # A new user's calendars, by the language of the request that makes them.
    calendars: NewCalendars
    stub_ttl: timedelta
    working_hours: tuple[time, time]
    holiday_country: str
    mail_domain: str = "calagent.localhost"
    # CALAGENT_PLAN_BUDGET_S: the solver's time for placing tasks (contract §21).
    plan_budget_s: float = 2.0
    # The zone of a user who saved none, when their token's is not at hand (another person's).
    default_tz: str = DEFAULT_ZONE

    @classmethod
    def from_settings(cls, settings: Settings) -> CommandConfig:
        return cls(
            calendars=NewCalendars(
                settings.calendars, {lang: settings.calendars_for(lang) for lang in ("zh", "en")}
            ),
            stub_ttl=timedelta(minutes=settings.stub_ttl_minutes),
            working_hours=parse_working_hours(settings.working_hours),
            holiday_country=settings.holiday_country,
            mail_domain=settings.mail_domain,
            default_tz=settings.default_tz,
            plan_budget_s=settings.plan_budget_s,
        )
