"""Receipts of reads: the events in a range, and the free time found for a meeting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from calagent.contracts.commands import EventOut
from calagent.contracts.queries import QueryResult
from calagent.contracts.suggestions import FreeSlot, NoSlotReason, SuggestionPeople

if TYPE_CHECKING:
    from calagent.agent.domain.receipts import View


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
