"""The rule in words a user confirms a series from: it must say what the RRULE says."""

from __future__ import annotations

import pytest

from calagent.agent.domain.rule_words import describe_rule

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("rule", "zh", "en"),
    [
        ("FREQ=WEEKLY;BYDAY=MO", "每周一", "every week on Mon"),
        ("FREQ=WEEKLY;BYDAY=MO,WE", "每周一、周三", "every week on Mon, Wed"),
        ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "每个工作日", "every week on Mon, Tue, Wed, Thu, Fri"),
        ("FREQ=DAILY", "每天", "every day"),
        ("FREQ=DAILY;COUNT=10", "每天，共 10 次", "every day, 10 times"),
        ("FREQ=WEEKLY;INTERVAL=2;BYDAY=FR", "每2周的周五", "every 2 weeks on Fri"),
        ("FREQ=MONTHLY;BYMONTHDAY=1,15", "每个月的1号、15号", "every month on day 1, 15"),
        ("FREQ=MONTHLY;BYDAY=-1FR", "每个月的最后一个周五", "every month on the last Fri"),
        ("FREQ=YEARLY;UNTIL=20301231", "每年，到 2030年12月31日 为止", "every year, until 2030-12-31"),
    ],
)
def test_rules_in_words(rule: str, zh: str, en: str) -> None:
    assert describe_rule(rule, "zh") == zh
    assert describe_rule(rule, "en") == en


def test_a_rule_it_cannot_phrase_is_shown_raw_not_guessed() -> None:
    assert describe_rule("FREQ=HOURLY", "zh") == "FREQ=HOURLY"
    assert describe_rule("FREQ=WEEKLY;BYDAY=XX", "en") == "FREQ=WEEKLY;BYDAY=XX"
