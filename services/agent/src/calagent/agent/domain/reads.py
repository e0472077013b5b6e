"""Receipts of reads: the events in a range, and the free time found for a meeting (each slot
with how sure it is and why, or why none fits: contract §20)."""

from __future__ import annotations

from collections.abc import Sequence

from calagent.agent.domain.offers import minutes_words
from calagent.agent.domain.view import View
from calagent.contracts.commands import EventOut
from calagent.contracts.queries import QueryResult
from calagent.contracts.suggestions import EmptyReason, FreeSlot, SuggestionPeople


def _event_line(event: EventOut, view: View) -> str:
    span = view.span(event.start, event.end, event.all_day)
    done = " ✓" if event.completed else ""
    if view.zh:
        return f"- {span} {event.title}（{event.calendar}）{done}"
    return f"- {span} {event.title} ({event.calendar}){done}"


def query_receipt(result: QueryResult, view: View) -> str:
    zh = view.zh
    if result.range_start is None or result.range_end is None:
        return "没有查到。" if zh else "Nothing found."
    window = f"{view.moment(result.range_start)} – {view.moment(result.range_end)}"
    if not result.events:
        return (f"{window} 没有安排。" if zh else f"Nothing scheduled {window}.") + _open_tasks(result, view)
    lines = "\n".join(_event_line(event, view) for event in result.events)
    head = f"{window} 共 {len(result.events)} 项安排：" if zh else f"{len(result.events)} event(s) {window}:"
    return f"{head}\n{lines}" + _open_tasks(result, view)


def _open_tasks(result: QueryResult, view: View) -> str:
    """The open tasks a read of what is not done carries (contract §21), each at risk by what."""
    if not result.tasks:
        return ""
    lines = []
    for task in result.tasks:
        due = (
            (f"，截止 {view.moment(task.due)}" if view.zh else f", due {view.moment(task.due)}")
            if task.due
            else ""
        )
        risk = ""
        if task.at_risk:
            short = minutes_words(task.missing_minutes, view)
            risk = f"，截止前还差 {short}" if view.zh else f", {short} short before the due"
        size = minutes_words(task.duration_minutes, view)
        lines.append(
            f"- {task.title}（{size}{due}{risk}）" if view.zh else f"- {task.title} ({size}{due}{risk})"
        )
    head = "\n未完成的任务：" if view.zh else "\nOpen tasks:"
    return head + "\n" + "\n".join(lines)


def _why_none(reason: EmptyReason | None, duration: int, people: SuggestionPeople | None, view: View) -> str:
    zh = view.zh
    together = people is not None and bool(people.counted)
    if reason == "window_too_short":
        return (
            f"这段时间已经过去，或剩下的不到 {duration} 分钟。"
            if zh
            else f"That range is over, or what is left of it is shorter than {duration} minutes."
        )
    if reason == "outside_hours" and together:
        return (
            f"这段时间里大家的工作时间没有连续 {duration} 分钟的重叠。"
            if zh
            else f"Your working hours do not overlap for {duration} minutes in that range."
        )
    if reason == "outside_hours":
        return (
            f"这段时间里你的工作时间不足 {duration} 分钟。"
            if zh
            else f"That range holds no {duration} minutes of your working hours."
        )
    if reason == "attendees_unavailable" and people is not None and people.busy:
        names = view.listing(people.busy)
        return (
            f"{names} 在这段时间里（大家的工作时间内）没有连续 {duration} 分钟的空闲。"
            if zh
            else f"{names} cannot meet for {duration} minutes in that range (busy in the working hours you share)."
        )
    if reason == "attendees_unavailable" and people is not None:
        names = view.listing(people.counted)
        return (
            f"你有空的时候，{names} 没有连续 {duration} 分钟的空闲。"
            if zh
            else f"No {duration} minutes in that range when you are free suit {names} too."
        )
    return (
        f"这段时间里你没有连续 {duration} 分钟的空闲（工作时间内）。"
        if zh
        else f"You have no free {duration}-minute slot in that range (within working hours)."
    )


def _how_sure(slot: FreeSlot, view: View) -> str:
    """Nothing when everyone is free; else the confidence and whose time makes it less."""
    if slot.reason == "all_free":
        return ""
    zh = view.zh
    # The first is the caller.
    you = "你" if zh else "you"
    tentative = [
        you if i == 0 else a.who for i, a in enumerate(slot.attendees) if a.availability == "tentative"
    ]
    sure = f"{slot.confidence:g}%"
    if tentative:
        names = view.listing(tentative)
        return f"（把握 {sure}：{names} 有暂定安排）" if zh else f" ({sure} sure: {names} tentative)"
    return f"（把握 {sure}：有人忙闲未知）" if zh else f" ({sure} sure: someone's free/busy is unknown)"


def free_time_receipt(
    slots: Sequence[FreeSlot],
    duration: int,
    view: View,
    *,
    people: SuggestionPeople | None = None,
    empty_reason: EmptyReason | None = None,
) -> str:
    zh = view.zh
    lines: list[str] = []
    if people is not None and people.counted:
        names = view.listing(people.counted)
        lines.append(
            f"已按 {names} 的忙闲和工作时间安排。"
            if zh
            else f"Counting the free/busy and working hours of {names}."
        )
    if people is not None and people.unknown:
        names = view.listing(people.unknown)
        lines.append(
            f"{names} 的忙闲未知（没有与你共享），按空闲计算。"
            if zh
            else f"Unknown free/busy for {names} (not shared with you): counted as free."
        )
    if not slots:
        lines.append(_why_none(empty_reason, duration, people, view))
        return "\n".join(lines)
    listed = "\n".join(f"- {view.span(s.start, s.end)}{_how_sure(s, view)}" for s in slots)
    lines.append(f"可以考虑这些空闲时间：\n{listed}" if zh else f"Free slots you could use:\n{listed}")
    return "\n".join(lines)
