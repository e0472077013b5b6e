"""Receipts: the reply after a terminal tool, written by code from the real result.

The model never re-narrates a result, so it cannot rewrite a date or claim a write that did not
happen. Every date carries its weekday and zone, its year when it is not this year, and both UTC
offsets when a DST change makes the clock time ambiguous.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from calagent.agent.domain.rule_words import describe_rule
from calagent.contracts.commands import (
    ChangeOut,
    CommandResult,
    EventOut,
    FreeSlot,
    NoSlotReason,
    QueryResult,
    StubOut,
    SuggestionPeople,
    SyncNotice,
)
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


def _event_line(event: EventOut, view: View) -> str:
    span = view.span(event.start, event.end, event.all_day)
    done = " ✓" if event.completed else ""
    if view.zh:
        return f"- {span} {event.title}（{event.calendar}）{done}"
    return f"- {span} {event.title} ({event.calendar}){done}"


def _conflict_names(stub: StubOut, view: View) -> str:
    parts = []
    for event in stub.conflicts_with:
        span = view.span(event.start, event.end, event.all_day)
        parts.append(f"「{event.title}」({span})" if view.zh else f'"{event.title}" ({span})')
    return ("、" if view.zh else ", ").join(parts)


def _proposed(stub: StubOut, view: View) -> str:
    if stub.proposed_start and stub.proposed_end:
        return view.span(stub.proposed_start, stub.proposed_end, bool(stub.slots.all_day))
    return ""


def superseded_clause(stub: StubOut, view: View) -> str:
    """One clause, so the user knows the earlier pending request was dropped, not merged."""
    return (
        f"（之前待定的「{stub.title}」已放弃。）"
        if view.zh
        else f' (The pending request "{stub.title}" was dropped.)'
    )


def kept_receipt(kept: StubOut, view: View) -> str:
    return (
        f"这个新日程来自转发或引用的内容，我没有新建；你待定的「{kept.title}」保持不变。如果要新建，请用你自己的话告诉我。"
        if view.zh
        else f'That new request comes from forwarded or quoted content, so I have not created it; your pending "{kept.title}" '
        "stays as it is. Tell me in your own words if you want it."
    )


def sync_notice_lines(notices: Sequence[SyncNotice], view: View) -> str:
    """What the connected calendar did not take as written since the last turn, one line each."""
    lines = []
    for notice in notices:
        event = notice.event
        when = _when(event, view)
        if notice.outcome == "rejected":
            lines.append(
                f"注意：「{event.title}」（{when}）没能写入你连接的日历，日历服务器拒绝了这次修改。"
                if view.zh
                else f'Note: "{event.title}" ({when}) could not be written to your connected calendar: '
                "its server refused the change."
            )
        else:
            lines.append(
                f"注意：「{event.title}」在你的日历里也被改过，已保留日历里的版本（{when}）；我的修改在待确认的请求里。"
                if view.zh
                else f'Note: "{event.title}" was also changed in your calendar; its version was kept '
                f"({when}), and my change is waiting for your confirmation."
            )
    return "\n".join(lines)


def _undo_text(result: CommandResult, view: View) -> str:
    """An undo, said from the rows as they are now: what came back, went, or was restored."""
    zh = view.zh
    if result.status == "created" and result.event is not None:
        event = result.event
        return (
            f"已撤销：「{event.title}」恢复了（{_when(event, view)}，日历「{event.calendar}」）。"
            if zh
            else f'Undone: "{event.title}" is back ({_when(event, view)}, calendar "{event.calendar}").'
        )
    if result.status == "deleted" and result.before is not None:
        return (
            f"已撤销：「{result.before.title}」（{_when(result.before, view)}）已移除。"
            if zh
            else f'Undone: "{result.before.title}" ({_when(result.before, view)}) is removed.'
        )
    if result.event is not None and result.before is not None:
        return (
            f"已撤销：「{result.event.title}」{_when(result.before, view)} → {_when(result.event, view)}。"
            if zh
            else f'Undone: "{result.event.title}" {_when(result.before, view)} → {_when(result.event, view)}.'
        )
    return "已撤销。" if zh else "Undone."


# Undo errors the user is told about in words (contract §15): nothing a better argument would fix.
_UNDO_REFUSALS: dict[str, tuple[str, str]] = {
    "changed_since": (
        "这个日程在那次修改之后又被改过了，撤销会覆盖后来的修改，所以我没有撤销，日历没有变化。",
        "That event was changed again after that change; undoing it would overwrite the later change, so nothing was undone.",
    ),
    "already_undone": (
        "那次修改已经撤销过了，日历没有变化。",
        "That change was already undone; nothing changed.",
    ),
    "nothing_to_undo": ("没有可以撤销的修改。", "There is no change to undo."),
}


def command_receipt(result: CommandResult, view: View) -> str:
    if result.kept is not None:
        return kept_receipt(result.kept, view)
    if result.error is not None and result.error.code in _UNDO_REFUSALS:
        zh_text, en_text = _UNDO_REFUSALS[result.error.code]
        return zh_text if view.zh else en_text
    if result.undid is not None:
        return _undo_text(result, view)
    text = _command_text(result, view)
    if result.reoffered:
        text = (
            "这个日程在我给出上面的确认之后又变了，所以我什么也没有改。按它现在的样子：" + text
            if view.zh
            else "That event changed after I offered this, so nothing was changed. As it is now: " + text
        )
    if result.superseded is not None:
        text += superseded_clause(result.superseded, view)
    return text


def _when(event: EventOut, view: View) -> str:
    return view.span(event.start, event.end, event.all_day)


def _change_offer(stub: StubOut, change: ChangeOut, view: View) -> str:
    """A held update or delete: what it is now, what it will be (or what goes), and the ask."""
    zh = view.zh
    title = change.before.title
    before = _when(change.before, view)
    scope = {
        "this": ("", ""),
        "following": ("（这一次及之后的所有重复）", " (this and all later occurrences)"),
        "all": ("（整个重复系列）", " (the whole series)"),
    }[change.scope]
    scope_text = scope[0] if zh else scope[1]
    if change.before.series_id is None:
        scope_text = ""
    if change.action == "update" and change.after is not None:
        after = _when(change.after, view)
        if after == before:
            after = "时间不变" if zh else "same time"
        renamed = change.after.title != title
        what = (
            (f"「{title}」→「{change.after.title}」" if renamed else f"「{title}」")
            if zh
            else (f'"{title}" → "{change.after.title}"' if renamed else f'"{title}"')
        )
        text = (
            f"要修改{what}{scope_text}：{before} → {after}。"
            if zh
            else f"Change {what}{scope_text}: {before} → {after}?"
        )
        if stub.status == "conflict" and stub.conflicts_with:
            names = _conflict_names(stub, view)
            text += f"新时间与 {names} 冲突。" if zh else f" The new time conflicts with {names}."
        if stub.hold_reason == "past_start":
            text += "新时间已经过去了。" if zh else " The new time is in the past."
        text += _recipients_clause(stub, view)
        return text + (
            "回复“确认”才会修改，现在没有任何改动。"
            if zh
            else ' Reply "confirm" to change it; nothing has changed yet.'
        )
    gone = ""
    if change.scope != "this" and change.removed_starts:
        starts = (
            "、".join(view.moment(s) for s in change.removed_starts)
            if zh
            else ", ".join(view.moment(s) for s in change.removed_starts)
        )
        total = change.removed_count
        more = ""
        if total is None:
            more = "，以及之后的每一次" if zh else ", and every one after"
        elif total > len(change.removed_starts):
            more = f"，共 {total} 次" if zh else f", {total} in all"
        gone = f"将删除：{starts}{more}。" if zh else f" Going: {starts}{more}."
    gone += _recipients_clause(stub, view)
    return (
        f"要删除「{title}」{scope_text}（{before}）吗？{gone}回复“确认”才会删除，现在没有任何改动。"
        if zh
        else f'Delete "{title}"{scope_text} ({before})?{gone} Reply "confirm" to delete it; nothing has changed yet.'
    )


def _people(people: Sequence[Attendee], view: View) -> str:
    names = [f"{p.name} <{p.email}>" if p.name else p.email for p in people]
    return ("、" if view.zh else ", ").join(names)


def _recipients_clause(stub: StubOut, view: View) -> str:
    """Whom the confirmation mails (contract §16: the receipt names every recipient)."""
    if stub.hold_reason != "sends_invitations" or not stub.recipients:
        return ""
    who = _people(stub.recipients, view)
    return f"确认后会给 {who} 发送邮件。" if view.zh else f" Confirming sends mail to {who}."


def _attendee_question(stub: StubOut, view: View) -> str:
    query = stub.attendee_query or ""
    if stub.attendee_candidates:
        options = " / ".join(f"{p.name} <{p.email}>" if p.name else p.email for p in stub.attendee_candidates)
        return (
            f"「{stub.title}」要邀请的“{query}”是哪一位？{options}。请回复名字或邮箱。"
            if view.zh
            else f'Who is "{query}" for "{stub.title}"? {options}. Reply with a name or an address.'
        )
    return (
        f"联系人里没有“{query}”。「{stub.title}」要邀请的人的邮箱是什么？"
        if view.zh
        else f'No contact is called "{query}". What is their e-mail address for "{stub.title}"?'
    )


def _series_plan(stub: StubOut, view: View) -> str:
    zh = view.zh
    rule = describe_rule(stub.slots.recurrence or "", view.lang)
    nexts = ("、" if zh else ", ").join(view.moment(s) for s in stub.next_occurrences)
    return (
        f"「{stub.title}」将按“{rule}”重复，接下来三次：{nexts}。回复“确认”后创建这个重复日程。"
        if zh
        else f'"{stub.title}" will repeat {rule}; the next three: {nexts}. Reply "confirm" to create the series.'
    )


def _plan_text(stub: StubOut, view: View, confirmed: bool) -> str:
    zh = view.zh
    plan = stub.plan
    trigger = plan.trigger if plan is not None else stub.title
    steps = ("；".join(plan.steps) if zh else "; ".join(plan.steps)) if plan is not None else ""
    if confirmed:
        return (
            f"已保存自动化计划（{trigger}：{steps}）。它不会自己运行；可以在计划列表里查看或删除。"
            if zh
            else f"Saved the automation plan ({trigger}: {steps}). It does not run by itself; "
            "you can see or delete it in your plans."
        )
    return (
        f"这是一个自动化计划，我不会自动执行：触发条件“{trigger}”，步骤：{steps}。回复“确认”保存这个计划。"
        if zh
        else f'This is an automation plan; nothing runs by itself. Trigger: "{trigger}". Steps: {steps}. '
        'Reply "confirm" to save the plan.'
    )


def _command_text(result: CommandResult, view: View) -> str:
    zh = view.zh
    stub = result.stub
    if result.status == "updated" and result.event is not None and result.before is not None:
        return (
            f"已修改「{result.event.title}」：{_when(result.before, view)} → {_when(result.event, view)}。"
            if zh
            else f'Changed "{result.event.title}": {_when(result.before, view)} → {_when(result.event, view)}.'
        )
    if result.status == "deleted" and result.before is not None:
        scope = stub.change.scope if stub is not None and stub.change is not None else "this"
        count = result.removed_count
        if result.before.series_id is not None and scope != "this":
            what = "整个重复系列" if scope == "all" else "这一次及之后的重复"
            what_en = "the whole series" if scope == "all" else "this and later occurrences"
            many = "" if count is None else (f"，共 {count} 次" if zh else f", {count} occurrences")
            return (
                f"已删除「{result.before.title}」{what}（从 {_when(result.before, view)} 起{many}）。"
                if zh
                else f'Deleted "{result.before.title}", {what_en} (from {_when(result.before, view)}{many}).'
            )
        return (
            f"已删除「{result.before.title}」（{_when(result.before, view)}）。"
            if zh
            else f'Deleted "{result.before.title}" ({_when(result.before, view)}).'
        )
    if result.status == "planned" and stub is not None:
        return _plan_text(stub, view, confirmed=stub.status == "planned")
    if result.status == "created" and result.event is not None:
        event = result.event
        span = view.span(event.start, event.end, event.all_day)
        text = (
            f"已创建「{event.title}」：{span}，日历「{event.calendar}」。"
            if zh
            else f'Created "{event.title}": {span}, calendar "{event.calendar}".'
        )
        if event.recurrence:
            rule = describe_rule(event.recurrence, view.lang)
            text += f"（{rule}重复）" if zh else f" (repeats {rule})"
        if event.reminder_minutes is not None:
            text += (
                f"（提前 {event.reminder_minutes} 分钟提醒）"
                if zh
                else f" (reminder {event.reminder_minutes} min before)"
            )
        if stub is not None and stub.invitation is not None:
            # Someone else's invitation, answered: the one message sent is the reply to its organizer.
            who = stub.invitation.organizer
            text += f"（已答复 {who}）" if zh else f" ({who} has your answer)"
        elif event.attendees:
            who = _people(event.attendees, view)
            text += f"（邀请已交给邮件发送：{who}）" if zh else f" (invitations on their way to {who})"
        if result.calendar_fallback is not None:
            fb = result.calendar_fallback
            text += (
                f"（你没有名为「{fb.requested}」的日历，已放入默认日历「{fb.used}」。）"
                if zh
                else f' (You have no calendar named "{fb.requested}", so it went to the default "{fb.used}".)'
            )
        return text
    if stub is None:
        if result.status == "cancelled":
            return "好的，已取消。" if zh else "OK, cancelled."
        if result.error is not None and result.error.code == "no_active_command":
            return "现在没有待确认的日程。" if zh else "There is no pending schedule request."
        if result.error is not None and result.error.code == "not_found":
            return (
                "没有找到这个日程，日历没有变化。" if zh else "I could not find that event; nothing changed."
            )
        return "这次没有写入日历。" if zh else "Nothing was written to your calendar."
    title = stub.title
    if result.status == "needs_date":
        if stub.candidates:
            options = " / ".join(view.day(day) for day in stub.candidates)
            return (
                f"「{title}」要安排在哪一天？可选：{options}。可以直接回复，例如“周日下午2点”。"
                if zh
                else f'Which day for "{title}"? Options: {options}. You can reply e.g. "Sunday 2pm".'
            )
        return f"「{title}」要安排在哪一天？" if zh else f'Which day should "{title}" be on?'
    if result.status == "needs_time":
        day = ""
        if stub.candidates:
            day = view.day(stub.candidates[0])
        return (
            f"「{title}」{day}几点开始？例如“下午两点”。"
            if zh
            else f'What time should "{title}" {("on " + day + " ") if day else ""}start? e.g. "2pm".'
        )
    if result.status == "needs_attendee":
        return _attendee_question(stub, view)
    if stub.kind == "change" and stub.change is not None and result.status in ("held", "conflict"):
        return _change_offer(stub, stub.change, view)
    if result.status == "conflict":
        when = _proposed(stub, view)
        names = _conflict_names(stub, view)
        return (
            f"「{title}」{when} 与 {names} 时间冲突。要换个时间，还是仍按原时间创建？"
            if zh
            else f'"{title}" {when} conflicts with {names}. Pick another time, or keep this time anyway?'
        )
    if result.status == "held":
        when = _proposed(stub, view)
        if stub.hold_reason == "recurrence_plan" and stub.slots.recurrence:
            return _series_plan(stub, view)
        if stub.hold_reason == "recurrence_unclear":
            return (
                f"你的话里像是要重复的日程，但这次只会建一次「{stub.title}」{when}。要只建这一次，请回复“确认”；要重复，请告诉我怎么重复。"
                if zh
                else f'Your words sound like something that repeats, but this would create "{stub.title}" {when} once. '
                'Reply "confirm" for just this once, or tell me how it repeats.'
            )
        if stub.hold_reason == "sends_invitations":
            who = _people(stub.recipients, view)
            return (
                f"「{title}」{when}：确认后我会创建它并给 {who} 发送邀请邮件。现在还没有写入，也没有发出任何邮件，回复“确认”即可。"
                if zh
                else f'"{title}" {when}: once you confirm, I will add it and send invitations to {who}. '
                'Nothing is written or sent yet; reply "confirm".'
            )
        if stub.hold_reason == "invitation_received" and stub.invitation is not None:
            who = stub.invitation.organizer
            if stub.invitation.method == "CANCEL":
                return (
                    f"{who} 取消了「{title}」{when}。要从日历中删除吗？回复“确认”即可。"
                    if zh
                    else f'{who} cancelled "{title}" {when}. Remove it from your calendar? Reply "confirm".'
                )
            return (
                f"{who} 邀请你参加「{title}」{when}。回复“接受”“拒绝”或“暂定”，我再回复对方；现在什么都没有写入或发出。"
                if zh
                else f'{who} invites you to "{title}" {when}. Reply "accept", "decline" or "tentative" and I will '
                "answer them; nothing is written or sent yet."
            )
        if stub.hold_reason == "third_party_content":
            return (
                f"这条日程来自转发或引用的内容，我先没有写入：「{title}」{when}。确认要添加吗？回复“确认”即可。"
                if zh
                else f'This comes from forwarded or quoted content, so I have not added it: "{title}" {when}. '
                'Reply "confirm" to add it.'
            )
        return (
            f"「{title}」{when} 已经过去了，我没有写入日历。如果确实要记录下来，请回复“确认”。"
            if zh
            else f'"{title}" {when} is in the past, so I have not added it. Reply "confirm" if you want it recorded.'
        )
    if result.status == "cancelled" and stub.invitation is not None and stub.invitation.method == "REQUEST":
        who = stub.invitation.organizer
        return f"已拒绝「{title}」，并告知了 {who}。" if zh else f'Declined "{title}"; {who} has been told.'
    if result.status == "cancelled":
        return f"好的，已取消「{title}」。" if zh else f'OK, cancelled "{title}".'
    if result.status == "expired":
        return (
            f"「{title}」的待确认请求已过期，没有创建。请重新告诉我。"
            if zh
            else f'The pending request for "{title}" expired and nothing was created. Please tell me again.'
        )
    return "这次没有写入日历。" if zh else "Nothing was written to your calendar."


def query_receipt(result: QueryResult, view: View) -> str:
    zh = view.zh
    if result.range_start is None or result.range_end is None:
        return "没有查到。" if zh else "Nothing found."
    window = f"{view.moment(result.range_start)} – {view.moment(result.range_end)}"
    if not result.events:
        return f"{window} 没有安排。" if zh else f"Nothing scheduled {window}."
    lines = "\n".join(_event_line(event, view) for event in result.events)
    head = f"{window} 共 {len(result.events)} 项安排：" if zh else f"{len(result.events)} event(s) {window}:"
    return f"{head}\n{lines}"


def free_time_receipt(
    slots: Sequence[FreeSlot],
    duration: int,
    view: View,
    *,
    people: SuggestionPeople | None = None,
    no_slot_reason: NoSlotReason | None = None,
) -> str:
    zh = view.zh
    lines: list[str] = []
    if people is not None and people.counted:
        names = "、".join(people.counted) if zh else ", ".join(people.counted)
        lines.append(
            f"已按 {names} 的忙闲和工作时间安排。"
            if zh
            else f"Counting the free/busy and working hours of {names}."
        )
    if people is not None and people.unknown:
        names = "、".join(people.unknown) if zh else ", ".join(people.unknown)
        lines.append(
            f"{names} 的忙闲未知（没有与你共享），按空闲计算。"
            if zh
            else f"Unknown free/busy for {names} (not shared with you): counted as free."
        )
    if not slots:
        together = people is not None and bool(people.counted)
        if no_slot_reason == "no_common_hours" and together:
            lines.append(
                "这段时间里大家的工作时间没有重叠。"
                if zh
                else "Your working hours do not overlap in that range."
            )
        elif no_slot_reason == "no_common_hours":
            lines.append(
                "这段时间不在你的工作时间内。" if zh else "That range is outside your working hours."
            )
        elif no_slot_reason == "past":
            lines.append("这段时间已经过去了。" if zh else "That range is already over.")
        elif zh:
            common = "共同" if together else ""
            lines.append(f"这段时间里没有连续 {duration} 分钟的{common}空闲（工作时间内）。")
        else:
            lines.append(f"No free {duration}-minute slot in that range (within working hours).")
        return "\n".join(lines)
    listed = "\n".join(f"- {view.span(s.start, s.end)}" for s in slots)
    lines.append(f"可以考虑这些空闲时间：\n{listed}" if zh else f"Free slots you could use:\n{listed}")
    return "\n".join(lines)


def memory_saved_receipt(content: str, lang: Lang) -> str:
    return f"已记住：{content}" if lang == "zh" else f"Noted: {content}"


def confirmation_not_own_words(lang: Lang) -> str:
    return (
        "确认需要你本人的话，转发或引用的内容不能确认待定的日程。请直接回复“确认”。"
        if lang == "zh"
        else 'A confirmation has to be your own words, not forwarded or quoted content. Reply "confirm" yourself.'
    )


def undo_not_own_words(lang: Lang) -> str:
    return (
        "撤销需要你本人的话，转发或引用的内容不能撤销日历上的修改。日历没有变化。"
        if lang == "zh"
        else "Taking a change back has to be your own words, not forwarded or quoted content. Nothing changed."
    )


def cancel_not_own_words(stub: StubOut | None, lang: Lang) -> str:
    """A cancel asked for by forwarded or quoted content: held, the pending request stays."""
    if stub is None:
        return (
            "转发或引用的内容要求取消，但你现在没有待定的日程，什么都没有改动。"
            if lang == "zh"
            else "Forwarded or quoted content asks to cancel something, but nothing is pending; nothing was changed."
        )
    return (
        f"转发或引用的内容要求取消「{stub.title}」，我没有取消，它仍在等你。如果你要取消，请亲自说“取消”。"
        if lang == "zh"
        else f'Forwarded or quoted content asks to cancel "{stub.title}"; I have not cancelled it and it is '
        'still pending. If you want it cancelled, say "cancel" yourself.'
    )


def memory_not_own_words(lang: Lang) -> str:
    return (
        "这段内容来自转发或引用，我没有把它记作你的记忆。如果要记住，请用你自己的话告诉我。"
        if lang == "zh"
        else "That comes from forwarded or quoted content, so I have not saved it as your memory. "
        "Tell me in your own words if you want it remembered."
    )


def replaced_create_claim(lang: Lang) -> str:
    return (
        "抱歉，我刚才的回答不准确：这次并没有改动你的日历。请再说一次要做的事和时间，我会真正去做。"
        if lang == "zh"
        else "Sorry, that was not accurate: nothing on your calendar was changed. "
        "Tell me again what to do and when, and I will actually do it."
    )


def replaced_read_claim(lang: Lang) -> str:
    return (
        "抱歉，我还没有查看你的日历，不能确定你的安排。要我查一下吗？例如“明天有什么安排”。"
        if lang == "zh"
        else "Sorry, I have not looked at your calendar yet, so I can't say what you have. "
        'Shall I check? e.g. "what\'s on tomorrow".'
    )


def model_unavailable_reply(lang: Lang) -> str:
    return (
        "抱歉，模型服务暂时不可用，我这次没有做任何操作，日历没有变化。请稍后再试。"
        if lang == "zh"
        else "Sorry, the language model is unavailable right now. I did nothing and your calendar is unchanged. "
        "Please try again shortly."
    )


def ask_user_after_errors(lang: Lang) -> str:
    return (
        "抱歉，我没能理解这个时间。能换个说法吗？例如“下周三下午3点”。"
        if lang == "zh"
        else 'Sorry, I could not work out that date or time. Could you say it another way, e.g. "next Wednesday 3pm"?'
    )


def direct_call_refused(message: str, lang: Lang) -> str:
    """A client's own command (no model to retry it) was refused; the reason as commands gave it."""
    if lang == "zh":
        return f"这个操作没有执行：{message}" if message else "这个操作没有执行。"
    return f"That was not done: {message}" if message else "That was not done."
