"""The canonical symbol grammar as regular expressions, shared by tool schemas and validation.

The model writes these; the time service resolves them. A pattern here only says a string is
well-formed: `2026-02-30` matches the shape and is still refused by the resolver.
"""

from typing import Final

_SIGNED = r"[+-](?:0|[1-9][0-9]{0,3})"
_HOLIDAY = r"H:[a-z][a-z_]{1,40}(?::[0-9]{4})?"

DATE_SYMBOL_RE: Final = (
    rf"(?:D(?:{_SIGNED})?|W[1-7](?:{_SIGNED})?|WE(?:{_SIGNED})?|[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}"
    rf"|--[0-9]{{2}}-[0-9]{{2}}|{_HOLIDAY})"
)
TIME_RE: Final = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]"
MONTH_SYMBOL_RE: Final = rf"(?:M(?:{_SIGNED})?|[0-9]{{4}}-[0-9]{{2}})"
RANGE_SYMBOL_RE: Final = rf"(?:{DATE_SYMBOL_RE}(?:T{TIME_RE})?|{MONTH_SYMBOL_RE})"

DATE_SYMBOL_PATTERN: Final = f"^{DATE_SYMBOL_RE}$"
TIME_PATTERN: Final = f"^{TIME_RE}$"
RANGE_SYMBOL_PATTERN: Final = f"^{RANGE_SYMBOL_RE}$"

# The RFC 5545 RRULE subset the model may write (contract §9): FREQ first, then any of INTERVAL,
# BYDAY, BYMONTHDAY, COUNT, UNTIL. The commands service parses it with dateutil and refuses what
# the library refuses; this only keeps the shape honest in the tool schema.
_BYDAY = r"(?:[+-]?[1-5])?(?:MO|TU|WE|TH|FR|SA|SU)"
_RRULE_PART = (
    rf"(?:INTERVAL=[1-9][0-9]{{0,2}}|BYDAY={_BYDAY}(?:,{_BYDAY}){{0,6}}"
    r"|BYMONTHDAY=-?[1-9][0-9]?(?:,-?[1-9][0-9]?){0,30}|COUNT=[1-9][0-9]{0,3}"
    r"|UNTIL=[0-9]{8}(?:T[0-9]{6}Z?)?)"
)
RRULE_RE: Final = rf"FREQ=(?:DAILY|WEEKLY|MONTHLY|YEARLY)(?:;{_RRULE_PART}){{0,5}}"
RRULE_PATTERN: Final = f"^{RRULE_RE}$"
