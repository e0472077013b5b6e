"""Public holidays for `H:<name>[:<year>]`, from the `holidays` package (never a hand-made table).

A multi-day holiday means its first day; without a year, the next occurrence whose first day is on
or after today. Observed/substituted days are not holidays of their own. Names are the library's
English names as slugs (`tomb_sweeping_day`) plus the short aliases the model is taught.
"""

from __future__ import annotations

import re
from datetime import date
from functools import lru_cache

from calagent.timeparse.domain.problems import InvalidSymbolError

__all__ = ["HOLIDAY_ALIASES", "holiday_date", "holiday_names"]

# Holiday years the library is asked about; outside it the answer is `unknown_holiday`, which also
# keeps a hostile `H:x:9999` from making the library compute millennia.
_HOLIDAY_YEARS = range(1950, 2201)

# Canonical names -> slugs of the holidays library's English names. Any slug of the library's own
# names is accepted too (`H:tomb_sweeping_day`), so this table only adds the short names the model
# is taught; the dates themselves always come from the library.
HOLIDAY_ALIASES: dict[str, tuple[str, ...]] = {
    "new_year": ("new_years_day",),
    "new_years": ("new_years_day",),
    "spring_festival": ("chinese_new_year_spring_festival", "chinese_new_year", "lunar_new_year"),
    "chinese_new_year": ("chinese_new_year_spring_festival", "lunar_new_year"),
    "lunar_new_year": ("chinese_new_year_spring_festival", "lunar_new_year"),
    "new_years_eve": ("chinese_new_years_eve", "new_years_eve"),
    "spring_festival_eve": ("chinese_new_years_eve",),
    "qingming": ("tomb_sweeping_day", "qingming_festival"),
    "tomb_sweeping": ("tomb_sweeping_day",),
    "labor_day": ("labor_day", "labour_day", "workers_day"),
    "labour_day": ("labor_day", "labour_day", "workers_day"),
    "may_day": ("labor_day", "labour_day"),
    "dragon_boat": ("dragon_boat_festival",),
    "mid_autumn": ("mid_autumn_festival",),
    "national_day": ("national_day",),
    "christmas": ("christmas_day",),
    "thanksgiving": ("thanksgiving_day", "thanksgiving"),
    "independence_day": ("independence_day",),
}


def _slug(name: str) -> str:
    out = re.sub(r"['’]", "", name.lower())
    return re.sub(r"[^a-z0-9]+", "_", out).strip("_")


@lru_cache(maxsize=256)
def _holiday_table(country: str, year: int) -> dict[str, date] | None:
    """slug -> first day of that holiday in `year`, or None when the country is unknown."""
    import holidays  # deferred: only holiday symbols pay for importing the library

    try:
        table = holidays.country_holidays(country, years=year, language="en_US", observed=False)
    except NotImplementedError:
        return None
    except (ValueError, KeyError):
        try:
            table = holidays.country_holidays(country, years=year, observed=False)
        except (NotImplementedError, ValueError, KeyError):
            return None
    first: dict[str, date] = {}
    for day, names in sorted(table.items()):
        # One date can carry several holidays ("A; B").
        for name in str(names).split("; "):
            if "(observed)" in name or name.startswith("Day off"):
                continue
            slug = _slug(name)
            if slug and slug not in first:
                first[slug] = day
    return first


def holiday_names(country: str, year: int) -> dict[str, date]:
    """Every name `H:` accepts for that country and year (library slugs plus aliases)."""
    table = _holiday_table(country.upper(), year) or {}
    names = dict(table)
    for alias, targets in HOLIDAY_ALIASES.items():
        for target in targets:
            if target in table:
                names.setdefault(alias, table[target])
                break
    return names


def _holiday_in(country: str, year: int, name: str) -> date | None:
    table = _holiday_table(country, year)
    if table is None:
        raise InvalidSymbolError("unknown_holiday", f"no public holidays are known for country {country!r}")
    if name in table:
        return table[name]
    for target in HOLIDAY_ALIASES.get(name, ()):
        if target in table:
            return table[target]
    return None


def holiday_date(name: str, year_text: str | None, today: date, country: str) -> date:
    country = country.upper()
    if year_text is not None:
        year = int(year_text)
        day = _holiday_in(country, year, name) if year in _HOLIDAY_YEARS else None
        if day is None:
            raise InvalidSymbolError("unknown_holiday", f"no holiday {name!r} in {country} in {year}")
        return day
    for year in (today.year, today.year + 1):
        if year not in _HOLIDAY_YEARS:
            continue
        day = _holiday_in(country, year, name)
        if day is not None and day >= today:
            return day
    raise InvalidSymbolError("unknown_holiday", f"no upcoming holiday {name!r} in {country}")
