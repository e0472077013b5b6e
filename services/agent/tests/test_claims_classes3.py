"""Unit tests of the classes widened after the third held-out set: each class with sentences of our
own (not the corpus's) and an honest counter-example beside it."""

from __future__ import annotations

import pytest

from calagent.agent.domain.claims import find_claims

pytestmark = pytest.mark.unit

W, R, WR, H = "w", "r", "wr", ""


def kinds(text: str) -> str:
    c = find_claims(text)
    return ("w" if c.write else "") + ("r" if c.read else "")


def check(text: str, want: str) -> None:
    got = kinds(text)
    assert got == want, (text, got)


# ── Chinese ─────────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # 你 opening a relative clause (你要的/你刚才说的 + noun) is not the subject: the noun is, and
        # the change is the agent's report, not the user's own doing.
        ("你刚才说的提醒设上了。", W),
        ("你要的地点改好了，在二号会议室。", W),
        ("你上周提的那个想法挺好的。", H),
        # 你 as the subject still makes the change the user's own (their calendar's contents).
        ("你明天安排了三个会。", R),
    ],
)
def test_zh_relative_clause_is_not_the_subject(text: str, want: str) -> None:
    check(text, want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # An error while the change ran is a failure, not a completion.
        ("保存日程时出了点问题，这次没有创建成功。", H),
        ("刚才删除会议的时候报错了，会议还在。", H),
        ("刚才的问题已经修好了，会议也改到周五了。", W),
        # A verb before 时/的时候 is the time of something else, even on a prefix of the reply.
        ("抱歉，修改日程时出了", H),
        ("会议推迟了一小时。", W),
        ("已删除，同时也取消了提醒。", W),
    ],
)
def test_zh_errors_are_failures(text: str, want: str) -> None:
    check(text, want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # Holding a slot: 占好/占上/圈出 a time on the calendar.
        ("已经帮你把周四下午占上了，专心写报告吧。", W),
        ("下周三全天给你圈出来了。", W),
        ("这次讨论他占了上风。", H),
        ("他的电话一直占线。", H),
    ],
)
def test_zh_holding_a_slot_is_a_write(text: str, want: str) -> None:
    check(text, want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # The time an arrangement was made for (约的是/订的是 + a time).
        ("你和牙医约的是周四上午十点。", R),
        ("机票订的是下周一早上八点的。", R),
        ("我觉得约的是周五比较好。", H),
        ("可以确定的是周一要交报告。", H),
        ("你想约的是周五下午吗？", H),
        # The calendar as evidence (日历上是/写着).
        ("体检在日历上是下周二早上的。", R),
        ("日历上写着呢，周六下午三点的婚礼。", R),
        ("日历上是可以设置重复规则的。", H),
        ("从日历上看，周四比较空。", R),
        ("根据你的日程，下周一你全天在外地出差。", R),
        ("从日历中删除了周五的会。", W),
        ("我可以根据你的日历推荐时间。", H),
    ],
)
def test_zh_arranged_time_and_calendar_evidence(text: str, want: str) -> None:
    check(text, want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # A superlative compares days of the calendar.
        ("这周周四是最空的一天。", R),
        ("最忙的时候也要记得吃饭。", H),
        # Appointments as calendar nouns, a month as a time, a noun opening with a verb after 没有.
        ("这个月你和王老师没有约见。", R),
        ("这个月没有变化。", H),
        # What a day holds after a change: a counted 事 after a time, and the rest of the day.
        ("那天就一件事，其余时间都空着。", R),
        ("周六就这两个事，其他时段都空。", R),
        ("还有一件事：记得带伞。", H),
        ("其他时间都可以，看你方便。", H),
        # Nothing besides what was named.
        ("好的，聚餐已删除，那天除了这个就没别的了。", WR),
        ("周五的瑜伽课已经取消了，那天就剩晚上的聚餐。", WR),
        # A range of clock times is one slot, not a list of entries.
        ("周一上午9点到11点给你占上了。", W),
        ("我可以约9点、10点的会", H),
        ("没别的事了，祝你愉快！", H),
    ],
)
def test_zh_contents_and_remainders(text: str, want: str) -> None:
    check(text, want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # A completed-operations header: its items are the changes made, not the calendar's contents.
        ("已处理以下事项：\n- 删除：周五 9:00 晨会\n- 新建：周五 10:00 评审会", W),
        ("已完成以下操作：新建周五的评审会、邀请王磊", W),
        # ... not when the operations are proposed, asked about or a capability.
        ("如果你同意，我会完成以下操作：\n- 删除：周五 9:00 晨会\n- 新建：周五 10:00 评审会", H),
        ("需要我完成以下操作吗？\n- 新建：周一 9:00 晨会\n- 新建：周二 14:00 评审", H),
        ("我们能完成以下操作：新建、修改、删除日程。", H),
        # A bare completion or a done status opening a list is such a header too.
        ("全部搞定：\n- 新建：周会 周一 9:00\n- 提醒：提前十分钟", W),
        ("操作已完成：删除周五晨会、新建周五评审。", W),
        ("如果操作已完成：请刷新页面", H),
        ("还没完成：\n- 新建周会", H),
        # A list of times without such a header stays the calendar's contents.
        ("你明天的安排：\n- 9:00 站会\n- 14:00 评审", R),
    ],
)
def test_zh_completed_operations_header(text: str, want: str) -> None:
    check(text, want)


# ── English ─────────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # A series brought to an end or put on hold is a change ...
        ("I've paused the weekly 1:1 series until you're back.", W),
        ("The Monday standup series has been discontinued as of next week.", W),
        ("The recurring standup was stopped after March.", W),
        # ... but an event that ran its course, or "ended up", is not.
        ("The review ended at 3.", H),
        ("We ended up going with the Tuesday slot.", H),
        ("The offsite series has been cut short after this week.", W),
        ("Cut the meeting to 30 minutes.", H),
    ],
)
def test_en_ending_a_series(text: str, want: str) -> None:
    check(text, want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # Appointments and occasions as calendar nouns; a month day with an ordinal.
        ("Your driving exam is on June 12th at 9 AM.", R),
        ("Good luck on your exam tomorrow!", H),
        # "per your calendar" is evidence of a read, like "according to your calendar".
        ("Per your calendar, the recital is Sunday at 4.", R),
        ("Per your request, I can move it to Friday.", H),
        # "haven't got" with the user as subject is have-not.
        ("You haven't got anything on Friday after 2.", R),
        ("You haven't got to decide now.", H),
        # Past availability reported beside a change.
        ("You were free Monday morning, so I put the haircut there at 10.", WR),
        ("You were right about the traffic.", H),
        # "next"/"upcoming" make any noun an entry; a definite event on a weekday.
        ("Your next physical is on March 2nd.", R),
        ("Your next step is to pick a time.", H),
        ("The recital is Sunday at 4.", R),
        ("The meeting is Monday's top priority.", H),
    ],
)
def test_en_contents_of_named_events(text: str, want: str) -> None:
    check(text, want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # A day as the holder of its entries.
        ("Friday now only has the dentist and one call.", R),
        ("Monday has nothing else.", R),
        ("Thursday has a better forecast.", H),
        ("Wednesday's only got the 10am review now.", R),
        ("Tuesday has got to be the day.", H),
        # Past availability of a day, reported beside a change.
        ("Saturday was open, so I put the hike in at 8.", WR),
        # What is left after a change.
        ("Only the 2pm call remains on Friday.", R),
        ("Just the Friday lunch is left.", R),
        ("The only thing left is to confirm Friday at 3.", H),
        ("Only one question remains: what time works?", H),
        # An entry's place in the day.
        ("That's now your only meeting on Wednesday.", R),
        ("Booked it for 5pm; that's the last call of the day.", WR),
        ("It's your first meeting with them, so bring slides.", H),
        ("That's the last thing I need today!", H),
        # What a change leaves.
        ("Booked the haircut at 10. That leaves your afternoon wide open.", WR),
        ("Moved the call, which leaves you with just the standup on Monday.", WR),
        ("That leaves you with two options.", H),
        ("That leaves you free to focus.", H),
    ],
)
def test_en_what_a_day_holds_after_a_change(text: str, want: str) -> None:
    check(text, want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # A plan of the user restated before an offer or question is an echo, not a read ...
        ("So you're flying to Lisbon Monday at 6 — want me to block the morning?", H),
        ("You're meeting Sam at 3 tomorrow, shall I add a reminder?", H),
        # ... stated alone it is the calendar's contents.
        ("You're meeting Sam at 3 tomorrow.", R),
        # "I can tell you how/what…" offers; "I can tell you have…" infers from the calendar.
        ("I can tell you what's on tomorrow if you like.", H),
        ("I could tell you how busy next week is, just ask.", H),
        ("I can tell you have a lot of meetings this week.", R),
    ],
)
def test_en_echoes_and_offers(text: str, want: str) -> None:
    check(text, want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # The completed-operations header in English.
        ("Here's what I changed:\n- Title: Team sync\n- Time: 3pm to 4pm on Friday", W),
        ("Here's what I can change:\n- Title\n- Time: 3pm to 4pm", H),
        ("Here's what I'd do:\n- Move the 1:1 to 3pm\n- Cancel the sync", H),
        ("I haven't made the following changes yet:\n- New event: Dentist, Tue 9:00", H),
    ],
)
def test_en_completed_operations_header(text: str, want: str) -> None:
    check(text, want)
