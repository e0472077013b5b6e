"""What a held request will do once the user confirms it (a change, a series, a plan, the mail
it sends), and the question a stub waits on; part of the receipts, in the reader's `View`.
"""

from __future__ import annotations

from collections.abc import Iterable

from calagent.agent.domain.rule_words import describe_rule
from calagent.agent.domain.view import View
from calagent.contracts.commands import ChangeOut, StubOut
from calagent.contracts.tasks import BlockMove, ReplanOut, TaskChangeOut, TaskField, TaskOut


def conflict_names(stub: StubOut, view: View) -> str:
    parts = []
    for event in stub.conflicts_with:
        span = view.span(event.start, event.end, event.all_day)
        parts.append(f"「{event.title}」({span})" if view.zh else f'"{event.title}" ({span})')
    return view.listing(parts)


def change_offer(stub: StubOut, change: ChangeOut, view: View) -> str:
    """A held update or delete: what it is now, what it will be (or what goes), and the ask."""
    zh = view.zh
    title = change.before.title
    before = view.when(change.before)
    scope = {
        "this": ("", ""),
        "following": ("（这一次及之后的所有重复）", " (this and all later occurrences)"),
        "all": ("（整个重复系列）", " (the whole series)"),
    }[change.scope]
    scope_text = scope[0] if zh else scope[1]
    if change.before.series_id is None:
        scope_text = ""
    if change.action == "update" and change.after is not None:
        after = view.when(change.after)
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
        if stub.conflicts_with:
            names = conflict_names(stub, view)
            text += f"新时间与 {names} 冲突。" if zh else f" The new time conflicts with {names}."
        if stub.hold_reason == "past_start":
            text += "新时间已经过去了。" if zh else " The new time is in the past."
        text += recipients_clause(stub, view)
        return text + (
            "回复“确认”才会修改，现在没有任何改动。"
            if zh
            else ' Reply "confirm" to change it; nothing has changed yet.'
        )
    gone = ""
    if change.scope != "this" and change.removed_starts:
        starts = view.listing(view.moment(s) for s in change.removed_starts)
        total = change.removed_count
        more = ""
        if total is None:
            more = "，以及之后的每一次" if zh else ", and every one after"
        elif total > len(change.removed_starts):
            more = f"，共 {total} 次" if zh else f", {total} in all"
        gone = f"将删除：{starts}{more}。" if zh else f" Going: {starts}{more}."
    gone += recipients_clause(stub, view)
    return (
        f"要删除「{title}」{scope_text}（{before}）吗？{gone}回复“确认”才会删除，现在没有任何改动。"
        if zh
        else f'Delete "{title}"{scope_text} ({before})?{gone} Reply "confirm" to delete it; nothing has changed yet.'
    )


def which_question(stub: StubOut, view: View) -> str:
    """A change found among several events for the same words (contract §20): each of them,
    numbered, and how to say which; nothing is changed until the user has, and confirmed."""
    zh = view.zh
    items = []
    for number, candidate in enumerate(stub.event_candidates, start=1):
        when = view.span(candidate.start, candidate.end, candidate.all_day)
        items.append(
            f"{number}. 「{candidate.title}」{when}（{candidate.calendar}）"
            if zh
            else f'{number}. "{candidate.title}" {when} ({candidate.calendar})'
        )
    listed = ("；" if zh else "; ").join(items)
    change = stub.change
    verb = (
        ("删除" if zh else "delete")
        if change is not None and change.action == "delete"
        else ("修改" if zh else "change")
    )
    return (
        f"找到 {len(items)} 个符合的日程，要{verb}哪一个？{listed}。回复序号（如“2”）、时间（如“五点那个”）或名称，"
        "现在没有任何改动。"
        if zh
        else f"I found {len(items)} matching events. Which one should I {verb}? {listed}. Reply with its number "
        '("2"), its time ("the 5pm one") or its name; nothing has changed yet.'
    )


def recipients_clause(stub: StubOut, view: View) -> str:
    """Whom the confirmation mails (contract §16: the receipt names every recipient)."""
    if stub.hold_reason != "sends_invitations" or not stub.recipients:
        return ""
    who = view.people(stub.recipients)
    return f"确认后会给 {who} 发送邮件。" if view.zh else f" Confirming sends mail to {who}."


def attendee_question(stub: StubOut, view: View) -> str:
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


def series_plan(stub: StubOut, view: View) -> str:
    zh = view.zh
    rule = describe_rule(stub.slots.recurrence or "", view.lang)
    nexts = view.listing(view.moment(s) for s in stub.next_occurrences)
    return (
        f"「{stub.title}」将按“{rule}”重复，接下来三次：{nexts}。回复“确认”后创建这个重复日程。"
        if zh
        else f'"{stub.title}" will repeat {rule}; the next three: {nexts}. Reply "confirm" to create the series.'
    )


def plan_text(stub: StubOut, view: View, confirmed: bool) -> str:
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


def minutes_words(minutes: int, view: View) -> str:
    """A length of work in hours and minutes ("3 小时 30 分钟", "3 h 30 min")."""
    hours, rest = divmod(minutes, 60)
    if view.zh:
        parts = ([f"{hours} 小时"] if hours else []) + ([f"{rest} 分钟"] if rest or not hours else [])
        return " ".join(parts)
    parts = ([f"{hours} h"] if hours else []) + ([f"{rest} min"] if rest or not hours else [])
    return " ".join(parts)


def _move_line(move: BlockMove, view: View) -> str:
    old = view.span(move.old_start, move.old_end) if move.old_start and move.old_end else None
    new = view.span(move.new_start, move.new_end) if move.new_start and move.new_end else None
    if view.zh:
        return f"「{move.title}」{old or '（新增）'} → {new or '移除（截止前没有空位）'}"
    return f'"{move.title}" {old or "(new)"} → {new or "removed (no room before its due)"}'


def block_moves(moves: Iterable[BlockMove], view: View) -> str:
    """Each block's old and new time, one after the other."""
    lines = "；".join if view.zh else "; ".join
    return lines(_move_line(m, view) for m in moves)


def replan_moves(replan: ReplanOut, view: View) -> str:
    """Each block's old and new time, and the tasks that would still miss minutes."""
    text = block_moves(replan.moves, view)
    short = view.listing(
        (
            f"「{title}」差 {minutes_words(m, view)}"
            if view.zh
            else f'"{title}" short by {minutes_words(m, view)}'
        )
        for title, m in replan.missing
    )
    if short:
        text += f"。截止前仍放不下：{short}" if view.zh else f". Still not fitting before the due: {short}"
    return text


def replan_offer(replan: ReplanOut, view: View) -> str:
    """A held re-plan of task blocks (contract §21): what moves where, and the ask."""
    moves = replan_moves(replan, view)
    if view.zh:
        return (
            f"这与任务的时间块重叠。建议这样重新安排：{moves}。回复“确认”才会移动，现在任务时间块都没有变。"
        )
    return (
        f'This lands on task blocks. Suggested re-plan: {moves}. Reply "confirm" to move them; '
        "nothing has moved yet."
    )


def replan_done(replan: ReplanOut, view: View) -> str:
    moves = replan_moves(replan, view)
    return f"已重新安排任务时间：{moves}。" if view.zh else f"Task blocks moved: {moves}."


_TASK_FIELD_NAMES: dict[TaskField, tuple[str, str]] = {
    "title": ("标题", "title"),
    "duration_minutes": ("时长", "duration"),
    "due": ("截止", "due"),
    "priority": ("优先级", "priority"),
    "percent": ("进度", "progress"),
    "done": ("状态", "status"),
}


def _task_value(task: TaskOut, name: TaskField, view: View) -> str:
    if name == "title":
        return f"「{task.title}」" if view.zh else f'"{task.title}"'
    if name == "duration_minutes":
        return minutes_words(task.duration_minutes, view)
    if name == "due":
        return view.moment(task.due) if task.due else ("无" if view.zh else "none")
    if name == "percent":
        return f"{task.percent}%"
    if name == "done":
        done = task.status == "done"
        return ("已完成" if done else "未完成") if view.zh else ("done" if done else "open")
    return str(task.priority)


def task_change_offer(change: TaskChangeOut, view: View) -> str:
    """Our change to a task offered again after the calendar changed it too (contract §22): each
    field it makes, from the calendar's value to ours, and the ask — or our removal of it."""
    title = change.before.title
    after = change.after
    if after is None:
        if view.zh:
            return f"任务「{title}」在你的日历里被改过，所以它还在。还要删除它吗？回复“确认”才会删除。"
        return f'The task "{title}" was changed in your calendar, so it is still there. Remove it anyway? Reply "confirm" to remove it.'
    parts = [
        f"{_TASK_FIELD_NAMES[n][0 if view.zh else 1]} {_task_value(change.before, n, view)} → "
        f"{_task_value(after, n, view)}"
        for n in change.fields
    ]
    if view.zh:
        return f"任务「{title}」在你的日历里也被改过。要再按我的修改改吗：{'；'.join(parts)}？回复“确认”才会修改。"
    return f'The task "{title}" was also changed in your calendar. Make my change again: {"; ".join(parts)}? Reply "confirm" to apply it.'


def task_removed(change: TaskChangeOut, view: View) -> str:
    """Our removal of a task, offered again and confirmed."""
    title = change.before.title
    return f"已删除任务「{title}」。" if view.zh else f'Removed task "{title}".'
