"""Receipts: the reply after a terminal tool, written by code from the real result.

The model never re-narrates a result, so it cannot rewrite a date or claim a write that did not
happen. Every date carries its weekday and zone, its year when it is not this year, and both UTC
offsets when a DST change makes the clock time ambiguous.

This module says what a command did (a write, an undo, a stub waiting on the user); what a held
request offers lives in `offers`, reads and free time in `reads`, fixed replies in `fixed_replies`.
"""

from __future__ import annotations

from collections.abc import Sequence

from calagent.agent.domain.choosing import asks_which
from calagent.agent.domain.offers import (
    attendee_question,
    block_moves,
    change_offer,
    conflict_names,
    minutes_words,
    plan_text,
    replan_done,
    replan_offer,
    series_plan,
    task_change_offer,
    task_removed,
    which_question,
)
from calagent.agent.domain.rule_words import describe_rule
from calagent.agent.domain.view import View
from calagent.contracts.commands import CommandResult, EventOut, StubOut
from calagent.contracts.people import ProposalOut
from calagent.contracts.queries import SyncNotice
from calagent.contracts.tasks import TaskOut


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
        f"这个请求不是你自己的话（来自转发、引用或别人的内容），我没有执行；你待定的「{kept.title}」保持不变。如果需要，请用你自己的话告诉我。"
        if view.zh
        else f'That request was not your own words, so I did not act on it; your pending "{kept.title}" stays as it is. '
        "Tell me in your own words if you want it."
    )


def sync_notice_lines(notices: Sequence[SyncNotice], view: View) -> str:
    """What the connected calendar did not take as written since the last turn, one line each."""
    lines = []
    for notice in notices:
        if notice.task is not None:
            lines.append(_task_notice_line(notice.outcome, notice.task, view))
            continue
        event = notice.event
        assert event is not None  # a notice names an event or a task
        when = view.when(event)
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


def _task_notice_line(outcome: str, task: TaskOut, view: View) -> str:
    if outcome == "rejected":
        return (
            f"注意：任务「{task.title}」没能写入你连接的日历，日历服务器拒绝了这次修改。"
            if view.zh
            else f'Note: the task "{task.title}" could not be written to your connected calendar: '
            "its server refused the change."
        )
    return (
        f"注意：任务「{task.title}」在你的日历里也被改过，已保留日历里的版本；我的修改在待确认的请求里。"
        if view.zh
        else f'Note: the task "{task.title}" was also changed in your calendar; its version was kept, '
        "and my change is waiting for your confirmation."
    )


def _undo_text(result: CommandResult, view: View) -> str:
    """An undo, said from the rows as they are now: what came back, went, or was restored."""
    if result.status == "created" and result.event is not None:
        event = result.event
        return _say(view, "undo.back", title=event.title, when=view.when(event), calendar=event.calendar)
    if result.status == "deleted" and result.before is not None:
        return _say(view, "undo.removed", title=result.before.title, when=view.when(result.before))
    if result.event is not None and result.before is not None:
        before, after = view.when(result.before), view.when(result.event)
        return _say(view, "undo.moved", title=result.event.title, before=before, after=after)
    return _say(view, "undo.done")


# Undo errors the user is told about in words (contract §15): nothing a better argument would fix.
_UNDO_REFUSALS = frozenset({"changed_since", "already_undone", "nothing_to_undo"})


def command_receipt(result: CommandResult, view: View) -> str:
    if result.kept is not None:
        return kept_receipt(result.kept, view)
    if result.error is not None and result.error.code in _UNDO_REFUSALS:
        return _say(view, f"undo.{result.error.code}")
    if result.undid is not None:
        text = _undo_text(result, view)
    elif result.task is not None:
        text = task_text(result, view)
    else:
        text = _command_text(result, view)
    # An event written, or brought back by an undo, onto task blocks: their re-plan is offered.
    if result.replan is not None and result.replan.replan is not None:
        text += replan_offer(result.replan.replan, view)
    if result.reoffered:
        text = (
            "这个日程在我给出上面的确认之后又变了，所以我什么也没有改。按它现在的样子：" + text
            if view.zh
            else "That event changed after I offered this, so nothing was changed. As it is now: " + text
        )
    if result.superseded is not None:
        text += superseded_clause(result.superseded, view)
    return text


# The texts of a command's receipt, (zh, en) by what happened: a status, a status and its reason
# (`held.<hold_reason>`), or a clause added to one. Each is filled with the fields it names.
_TEXTS: dict[str, tuple[str, str]] = {
    "updated": ("已修改「{title}」：{before} → {after}。", 'Changed "{title}": {before} → {after}.'),
    "deleted": ("已删除「{title}」（{when}）。", 'Deleted "{title}" ({when}).'),
    "deleted.all": (
        "已删除「{title}」整个重复系列（从 {when} 起{many}）。",
        'Deleted "{title}", the whole series (from {when}{many}).',
    ),
    "deleted.following": (
        "已删除「{title}」这一次及之后的重复（从 {when} 起{many}）。",
        'Deleted "{title}", this and later occurrences (from {when}{many}).',
    ),
    "deleted.count": ("，共 {count} 次", ", {count} occurrences"),
    "created": (
        "已创建「{title}」：{span}，日历「{calendar}」。",
        'Created "{title}": {span}, calendar "{calendar}".',
    ),
    "created.rule": ("（{rule}重复）", " (repeats {rule})"),
    "created.reminder": ("（提前 {minutes} 分钟提醒）", " (reminder {minutes} min before)"),
    "created.answered": ("（已答复 {who}）", " ({who} has your answer)"),
    "created.invited": ("（邀请已交给邮件发送：{who}）", " (invitations on their way to {who})"),
    "created.fallback": (
        "（你没有名为「{requested}」的日历，已放入默认日历「{used}」。）",
        ' (You have no calendar named "{requested}", so it went to the default "{used}".)',
    ),
    "undo.back": (
        "已撤销：「{title}」恢复了（{when}，日历「{calendar}」）。",
        'Undone: "{title}" is back ({when}, calendar "{calendar}").',
    ),
    "undo.removed": ("已撤销：「{title}」（{when}）已移除。", 'Undone: "{title}" ({when}) is removed.'),
    "undo.moved": ("已撤销：「{title}」{before} → {after}。", 'Undone: "{title}" {before} → {after}.'),
    "undo.done": ("已撤销。", "Undone."),
    "undo.changed_since": (
        "这个日程在那次修改之后又被改过了，撤销会覆盖后来的修改，所以我没有撤销，日历没有变化。",
        "That event was changed again after that change; undoing it would overwrite the later change, so nothing was undone.",
    ),
    "undo.already_undone": (
        "那次修改已经撤销过了，日历没有变化。",
        "That change was already undone; nothing changed.",
    ),
    "undo.nothing_to_undo": ("没有可以撤销的修改。", "There is no change to undo."),
    "cancelled.no_stub": ("好的，已取消。", "OK, cancelled."),
    "no_active_command": ("现在没有待确认的日程。", "There is no pending schedule request."),
    "not_found": ("没有找到这个日程，日历没有变化。", "I could not find that event; nothing changed."),
    "nothing_written": ("这次没有写入日历。", "Nothing was written to your calendar."),
    "needs_date": ("「{title}」要安排在哪一天？", 'Which day should "{title}" be on?'),
    "needs_date.options": (
        "「{title}」要安排在哪一天？可选：{options}。可以直接回复，例如“周日下午2点”。",
        'Which day for "{title}"? Options: {options}. You can reply e.g. "Sunday 2pm".',
    ),
    "needs_time": ("「{title}」几点开始？例如“下午两点”。", 'What time should "{title}" start? e.g. "2pm".'),
    "needs_time.day": (
        "「{title}」{day}几点开始？例如“下午两点”。",
        'What time should "{title}" on {day} start? e.g. "2pm".',
    ),
    "conflict": (
        "「{title}」{when} 与 {names} 时间冲突。要换个时间，还是仍按原时间创建？",
        '"{title}" {when} conflicts with {names}. Pick another time, or keep this time anyway?',
    ),
    "held.past_start": (
        "「{title}」{when} 已经过去了，我没有写入日历。如果确实要记录下来，请回复“确认”。",
        '"{title}" {when} is in the past, so I have not added it. Reply "confirm" if you want it recorded.',
    ),
    "held.recurrence_unclear": (
        "你的话里像是要重复的日程，但这次只会建一次「{title}」{when}。要只建这一次，请回复“确认”；要重复，请告诉我怎么重复。",
        'Your words sound like something that repeats, but this would create "{title}" {when} once. '
        'Reply "confirm" for just this once, or tell me how it repeats.',
    ),
    "held.sends_invitations": (
        "「{title}」{when}：确认后我会创建它并给 {who} 发送邀请邮件。现在还没有写入，也没有发出任何邮件，回复“确认”即可。",
        '"{title}" {when}: once you confirm, I will add it and send invitations to {who}. '
        'Nothing is written or sent yet; reply "confirm".',
    ),
    "held.third_party_content": (
        "这条日程不是你自己的话要求的（来自转发、引用或别人的内容），我先没有写入：「{title}」{when}。确认要添加吗？回复“确认”即可。",
        "This was not asked for in your own words (it came from forwarded, quoted or someone else's content), "
        'so I have not added it: "{title}" {when}. Reply "confirm" to add it.',
    ),
    # An invitation received by mail (hold reason `invitation_received`), by its method.
    "invitation.REQUEST": (
        "{who} 邀请你参加「{title}」{when}。回复“接受”“拒绝”或“暂定”，我再回复对方；现在什么都没有写入或发出。",
        '{who} invites you to "{title}" {when}. Reply "accept", "decline" or "tentative" and I will '
        "answer them; nothing is written or sent yet.",
    ),
    "invitation.CANCEL": (
        "{who} 取消了「{title}」{when}。回复“接受”从日历中删除，回复“拒绝”则保留。",
        '{who} cancelled "{title}" {when}. Reply "accept" to remove it from your calendar, "decline" to keep it.',
    ),
    # Said before either of the two above when the sender is not in the contacts (contract §19).
    "invitation.stranger": (
        "发件人不在你的联系人中。",
        "This comes from someone not in your contacts. ",
    ),
    # An attendee's counter-proposal (hold reason `counter_received`) and its refusal.
    "counter": (
        "{who} 提议把「{title}」从 {before} 改到 {after}。回复“确认”我会改期并通知所有参会人；回复“拒绝”我会告诉对方不改。现在没有任何改动。",
        '{who} proposes moving "{title}" from {before} to {after}. Reply "confirm" and I will move it and tell '
        'everyone invited; "decline" and I will tell them no. Nothing has changed yet.',
    ),
    "cancelled.counter": (
        "已拒绝 {who} 对「{title}」的改期提议，并告知了对方。",
        'Declined the new time {who} proposed for "{title}"; they have been told.',
    ),
    # Times proposed to someone outside (kind `proposal`), mailed once confirmed; and the one they
    # chose (kind `booking`), booked once confirmed.
    "proposal": (
        "我会给 {who} 发一封邮件，请对方从这些时间里选一个「{title}」的时间：{slots}。发出后这些时间会先暂时占住。"
        "回复“确认”发送；现在什么都没有写入或发出。",
        'I will mail {who} these times for "{title}" to choose from: {slots}. Once sent, they are held '
        'as tentative. Reply "confirm" to send; nothing is written or sent yet.',
    ),
    "proposal.sent": (
        "已把 {count} 个时间发给 {who}（「{title}」），这些时间已暂时占住；对方选定后我会请你确认。",
        'Sent {who} {count} times for "{title}"; they are held as tentative until they choose, '
        "and I will ask you before booking.",
    ),
    "booking": (
        "{who} 选了「{title}」{when}。回复“确认”我会创建它、给对方发送邀请并释放其余暂定时间；现在什么都没有改动。",
        '{who} chose {when} for "{title}". Reply "confirm" and I will book it, send them the invitation '
        "and release the other held times; nothing has changed yet.",
    ),
    "cancelled": ("好的，已取消「{title}」。", 'OK, cancelled "{title}".'),
    "cancelled.declined": ("已拒绝「{title}」，并告知了 {who}。", 'Declined "{title}"; {who} has been told.'),
    "expired": (
        "「{title}」的待确认请求已过期，没有创建。请重新告诉我。",
        'The pending request for "{title}" expired and nothing was created. Please tell me again.',
    ),
    # Placing a task moved other tasks' blocks (contract §21: never silently).
    "task.moved": (
        "为了腾出时间，已移动其他任务的时间块：{moves}。",
        " To make room, other tasks' blocks moved: {moves}.",
    ),
}


def _say(view: View, key: str, **fields: object) -> str:
    zh_text, en_text = _TEXTS[key]
    return (zh_text if view.zh else en_text).format(**fields)


def _command_text(result: CommandResult, view: View) -> str:
    stub = result.stub
    if result.status == "updated" and result.event is not None and result.before is not None:
        before, after = view.when(result.before), view.when(result.event)
        return _say(view, "updated", title=result.event.title, before=before, after=after)
    if result.status == "deleted" and result.before is not None:
        return _deleted_text(result.before, stub, result.removed_count, view)
    if result.status == "planned" and stub is not None:
        return plan_text(stub, view, confirmed=stub.status == "planned")
    if result.status == "created" and result.event is not None:
        return _created_text(result, result.event, view)
    if stub is None:
        return _say(view, _stubless_key(result))
    return _stub_text(result, stub, view)


def _deleted_text(before: EventOut, stub: StubOut | None, count: int | None, view: View) -> str:
    scope = stub.change.scope if stub is not None and stub.change is not None else "this"
    when = view.when(before)
    if before.series_id is None or scope == "this":
        return _say(view, "deleted", title=before.title, when=when)
    many = "" if count is None else _say(view, "deleted.count", count=count)
    key = "deleted.all" if scope == "all" else "deleted.following"
    return _say(view, key, title=before.title, when=when, many=many)


def _created_text(result: CommandResult, event: EventOut, view: View) -> str:
    text = _say(view, "created", title=event.title, span=view.when(event), calendar=event.calendar)
    if event.recurrence:
        text += _say(view, "created.rule", rule=describe_rule(event.recurrence, view.lang))
    if event.reminder_minutes is not None:
        text += _say(view, "created.reminder", minutes=event.reminder_minutes)
    if result.stub is not None and result.stub.invitation is not None:
        # Someone else's invitation, answered: the one message sent is the reply to its organizer.
        text += _say(view, "created.answered", who=result.stub.invitation.organizer)
    elif event.attendees:
        text += _say(view, "created.invited", who=view.people(event.attendees))
    if result.calendar_fallback is not None:
        fallback = result.calendar_fallback
        text += _say(view, "created.fallback", requested=fallback.requested, used=fallback.used)
    return text


def _stubless_key(result: CommandResult) -> str:
    if result.status == "cancelled":
        return "cancelled.no_stub"
    code = result.error.code if result.error is not None else None
    return code if code in ("no_active_command", "not_found") else "nothing_written"


def task_text(result: CommandResult, view: View) -> str:
    """A task added (its blocks, or what does not fit before its due) or done (contract §21)."""
    task = result.task
    assert task is not None
    zh = view.zh
    if task.status == "done":
        return (
            f"已完成任务「{task.title}」，之后为它安排的时间已释放。"
            if zh
            else f'Task "{task.title}" is done; its later blocks are freed.'
        )
    due = (
        f"，截止 {view.moment(task.due)}"
        if zh and task.due
        else (f", due {view.moment(task.due)}" if task.due else "")
    )
    made = result.status == "created"
    text = (
        f"已{'添加' if made else '修改'}任务「{task.title}」（{minutes_words(task.duration_minutes, view)}{due}）。"
        if zh
        else f'{"Added" if made else "Changed"} task "{task.title}" ({minutes_words(task.duration_minutes, view)}{due}).'
    )
    if result.blocks:
        spans = view.listing(view.span(b.start, b.end) for b in result.blocks)
        text += f"已安排在：{spans}。" if zh else f" Placed at: {spans}."
    if result.moved_blocks:
        text += _say(view, "task.moved", moves=block_moves(result.moved_blocks, view))
    if task.at_risk:
        short = minutes_words(task.missing_minutes, view)
        text += (
            f"截止前还差 {short} 放不下，我没有把它排在截止之后。"
            if zh
            else f" {short} do not fit before the due; none of it was placed after the due."
        )
    return text


def _stub_text(result: CommandResult, stub: StubOut, view: View) -> str:
    """What the stub the command left still needs, offers, or how it ended."""
    if stub.kind == "task_change" and stub.task_change is not None:
        if result.status == "held":
            return task_change_offer(stub.task_change, view)
        if result.status == "deleted":
            return task_removed(stub.task_change, view)
    if stub.kind == "replan" and stub.replan is not None:
        if result.status == "held":
            return replan_offer(stub.replan, view)
        if result.status == "updated":
            return replan_done(stub.replan, view)
    if result.status == "needs_attendee":
        return attendee_question(stub, view)
    if result.status == "held" and asks_which(stub):
        return which_question(stub, view)
    if stub.proposal is not None and result.status in ("held", "created"):
        return _proposal_text(result, stub, stub.proposal, view)
    if stub.counter is not None and stub.change is not None and stub.change.after is not None:
        if result.status == "held":
            before, after = view.when(stub.change.before), view.when(stub.change.after)
            return _say(
                view, "counter", who=stub.counter.proposer, title=stub.title, before=before, after=after
            )
        if result.status == "cancelled":
            return _say(view, "cancelled.counter", who=stub.counter.proposer, title=stub.title)
    if stub.kind == "change" and stub.change is not None and result.status in ("held", "conflict"):
        return change_offer(stub, stub.change, view)
    if result.status == "held" and stub.hold_reason == "recurrence_plan" and stub.slots.recurrence:
        return series_plan(stub, view)
    key = _stub_key(result, stub)
    if key == "held.sends_invitations":
        who = view.people(stub.recipients)
    else:
        who = stub.invitation.organizer if stub.invitation is not None else ""
    stranger = (
        key.startswith("invitation.") and stub.invitation is not None and not stub.invitation.sender_known
    )
    return (_say(view, "invitation.stranger") if stranger else "") + _say(
        view,
        key,
        title=stub.title,
        when=_proposed(stub, view),
        options=" / ".join(view.day(day) for day in stub.candidates),
        day=view.day(stub.candidates[0]) if stub.candidates else "",
        names=conflict_names(stub, view) if key == "conflict" else "",
        who=who,
    )


def _proposal_text(result: CommandResult, stub: StubOut, proposal: ProposalOut, view: View) -> str:
    """A proposal of times (to send, or sent), or the time its attendee chose (to book)."""
    who = proposal.attendee.email
    if stub.kind == "booking" and proposal.chosen is not None:
        slot = proposal.slots[proposal.chosen]
        return _say(view, "booking", who=who, title=stub.title, when=view.span(slot.start, slot.end))
    if result.status == "created":
        return _say(view, "proposal.sent", who=who, title=stub.title, count=len(proposal.slots))
    slots = "；".join if view.zh else "; ".join
    listed = slots(f"{n}. {view.span(s.start, s.end)}" for n, s in enumerate(proposal.slots, start=1))
    return _say(view, "proposal", who=who, title=stub.title, slots=listed)


def _stub_key(result: CommandResult, stub: StubOut) -> str:
    invitation = stub.invitation
    if result.status in ("needs_date", "needs_time"):
        suffix = ".options" if result.status == "needs_date" else ".day"
        return result.status + suffix if stub.candidates else result.status
    if result.status == "held":
        if stub.hold_reason == "invitation_received" and invitation is not None:
            return f"invitation.{invitation.method}"
        key = f"held.{stub.hold_reason}"
        # A hold whose reason has no words of its own is said as a start in the past.
        return key if key in _TEXTS else "held.past_start"
    if result.status == "cancelled":
        declined = invitation is not None and invitation.method == "REQUEST"
        return "cancelled.declined" if declined else "cancelled"
    if result.status in ("conflict", "expired"):
        return result.status
    return "nothing_written"
