"""A task as a VTODO (contract §21) kept whole under §14's rules: pure code, no server.

A task the assistant makes is written with its fields; a VTODO another app wrote is read into a
task, changed as the API changes it, written back, and compared property by property with the
original: only what the change touched differs.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from icalendar import Calendar

from calagent.commands.domain.model import Event
from calagent.commands.ical.render import render_resource
from calagent.commands.ical.todo import (
    is_todo,
    our_priority,
    parse_todo,
    patch_todo,
    render_todo,
    rfc_priority,
    todo_body,
    todo_fingerprint,
)
from calagent.contracts.tasks import TaskOut
from calagent.devtools.testing.examples import examples
from calagent.devtools.testing.icalobjects import (
    STAMPS,
    alarm_lines,
    property_lines,
    rich_todos,
    sequence,
    vtodos,
)
from calagent.devtools.testing.tasks import task_out

pytestmark = pytest.mark.unit

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 24, 8, 0, 12, 345678, tzinfo=UTC)

FOREIGN = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Apple Inc.//iOS 18//EN\r\n"
    "BEGIN:VTODO\r\nUID:A1B2-report@example.com\r\nDTSTAMP:20260901T080000Z\r\n"
    "CREATED:20260801T080000Z\r\nLAST-MODIFIED:20260901T080000Z\r\nSEQUENCE:4\r\n"
    "SUMMARY;LANGUAGE=zh-CN:季度报告\r\nDUE;TZID=Asia/Shanghai:20260925T180000\r\n"
    "PRIORITY:1\r\nSTATUS:NEEDS-ACTION\r\nCATEGORIES:工作,报告\r\n"
    "RELATED-TO;RELTYPE=CHILD:sub-1@example.com\r\nRRULE:FREQ=MONTHLY;COUNT=3\r\n"
    "X-APPLE-SORT-ORDER:612345678\r\n"
    "DESCRIPTION:先收集各部门数据，\r\n 再写结论\r\n"
    'X-CUSTOM;X-PARAM="a":quoted where it need not be\r\n'
    'X-CUSTOM;X-PARAM="semi;colon":value\\, with\\; odd: chars\r\n'
    "BEGIN:VALARM\r\nACTION:DISPLAY\r\nTRIGGER;RELATED=END:-PT30M\r\nDESCRIPTION:Reminder\r\n"
    "UID:AL1\r\nEND:VALARM\r\nEND:VTODO\r\nEND:VCALENDAR\r\n"
)


def task(**changes: object) -> TaskOut:
    return task_out(**{"due": datetime(2026, 9, 25, 10, 0, tzinfo=UTC), "priority": 2, **changes})


def kept_lines(body: str, touched: set[str]) -> list[str]:
    """The object's content lines, unfolded, in order, but for those of the `touched` properties."""
    lines = body.replace("\r\n ", "").split("\r\n")
    return [line for line in lines if line.split(":")[0].split(";")[0] not in touched]


def the_todo(body: str) -> dict[str, str]:
    [todo] = vtodos(body)
    return {name: str(todo.content_line(name, todo[name])) for name in todo}


def test_priorities_go_to_rfc_5545_and_come_back_the_same() -> None:
    assert [rfc_priority(p) for p in (1, 2, 3, 4)] == [1, 3, 5, 9]
    assert [our_priority(rfc_priority(p)) for p in (1, 2, 3, 4)] == [1, 2, 3, 4]
    assert [our_priority(v) for v in range(10)] == [3, 1, 1, 2, 2, 3, 4, 4, 4, 4]


def test_a_task_of_the_assistant_is_written_with_its_fields_and_read_back_the_same() -> None:
    mine = task(earliest=datetime(2026, 9, 24, 2, 0, tzinfo=UTC), chunk_minutes=45, hours="personal")
    body = render_todo(mine, "t1@calagent", NOW)
    lines = the_todo(body)
    assert is_todo(body)
    assert lines["UID"] == "UID:t1@calagent"
    assert lines["DUE"] == "DUE:20260925T100000Z"
    assert lines["DTSTART"] == "DTSTART:20260924T020000Z"
    assert lines["PRIORITY"] == "PRIORITY:3"
    assert lines["STATUS"] == "STATUS:NEEDS-ACTION"
    assert lines["X-CALAGENT-DURATION"] == "X-CALAGENT-DURATION:PT4H"
    assert "PERCENT-COMPLETE" not in lines and "COMPLETED" not in lines
    read = parse_todo(body, task_id="t1", tz=SHANGHAI)
    assert read.uid == "t1@calagent"
    assert read.task == mine

    done = mine.model_copy(update={"status": "done", "percent": 100, "completed_at": NOW})
    lines = the_todo(render_todo(done, "t1@calagent", NOW))
    assert (lines["STATUS"], lines["PERCENT-COMPLETE"], lines["COMPLETED"]) == (
        "STATUS:COMPLETED",
        "PERCENT-COMPLETE:100",
        "COMPLETED:20260924T080012Z",
    )


def test_another_apps_task_is_read_with_its_due_priority_and_our_defaults() -> None:
    read = parse_todo(FOREIGN, task_id="t9", tz=SHANGHAI)
    assert read.uid == "A1B2-report@example.com"
    assert read.task.model_dump(include={"title", "due", "priority", "status", "duration_minutes"}) == {
        "title": "季度报告",
        "due": datetime(2026, 9, 25, 10, 0, tzinfo=UTC),
        "priority": 1,
        "status": "open",
        "duration_minutes": 30,
    }
    completed = FOREIGN.replace("STATUS:NEEDS-ACTION", "STATUS:COMPLETED\r\nCOMPLETED:20260925T020000Z")
    assert parse_todo(completed, task_id="t9", tz=SHANGHAI).task.status == "done"
    dated = FOREIGN.replace("DUE;TZID=Asia/Shanghai:20260925T180000", "DUE;VALUE=DATE:20260925")
    # Due on a day: by the end of it, on the user's wall clock.
    assert parse_todo(dated, task_id="t9", tz=SHANGHAI).task.due == datetime(2026, 9, 25, 16, tzinfo=UTC)
    assert not is_todo(FOREIGN.replace("VTODO", "VEVENT"))


def test_completing_another_apps_task_rewrites_only_status_percent_and_completed() -> None:
    read = parse_todo(FOREIGN, task_id="t9", tz=SHANGHAI).task
    done = read.model_copy(update={"status": "done", "percent": 100, "completed_at": NOW})
    written = patch_todo(FOREIGN, done, NOW, SHANGHAI)
    assert written.changed
    [before], [after] = vtodos(FOREIGN), vtodos(written.text)
    touched = {"STATUS", "PERCENT-COMPLETE", "COMPLETED", *STAMPS}
    assert property_lines(after, touched) == property_lines(before, touched)
    assert alarm_lines(after) == alarm_lines(before)
    lines = the_todo(written.text)
    assert (lines["STATUS"], lines["PERCENT-COMPLETE"], lines["COMPLETED"]) == (
        "STATUS:COMPLETED",
        "PERCENT-COMPLETE:100",
        "COMPLETED:20260924T080012Z",
    )
    assert sequence(after) == 5
    # Byte for byte and in the app's order, but for what the change touched: its folds and
    # its quoting too.
    assert kept_lines(written.text, touched) == kept_lines(FOREIGN, touched)
    assert "DESCRIPTION:先收集各部门数据，\r\n 再写结论\r\n" in written.text
    assert 'X-CUSTOM;X-PARAM="a":quoted where it need not be\r\n' in written.text
    # Written once more with the same task (its completion time to the microsecond): no change.
    assert patch_todo(written.text, done, NOW + timedelta(hours=1), SHANGHAI).text == written.text


def test_a_new_due_keeps_its_zone_and_a_task_that_says_the_same_gives_back_the_object() -> None:
    read = parse_todo(FOREIGN, task_id="t9", tz=SHANGHAI).task
    assert patch_todo(FOREIGN, read, NOW, SHANGHAI).text == FOREIGN
    assert todo_body(read, "ignored", FOREIGN, NOW, SHANGHAI) == FOREIGN
    later = read.model_copy(update={"due": read.due + timedelta(days=1) if read.due else None})
    lines = the_todo(patch_todo(FOREIGN, later, NOW, SHANGHAI).text)
    assert lines["DUE"] == "DUE;TZID=Asia/Shanghai:20260926T180000"
    assert lines["PRIORITY"] == "PRIORITY:1"


def test_a_longer_estimate_is_the_only_property_the_assistant_adds() -> None:
    read = parse_todo(FOREIGN, task_id="t9", tz=SHANGHAI).task
    longer = patch_todo(FOREIGN, read.model_copy(update={"duration_minutes": 90}), NOW, SHANGHAI).text
    [before], [after] = vtodos(FOREIGN), vtodos(longer)
    assert set(property_lines(after)) - set(property_lines(before)) == {"X-CALAGENT-DURATION"}
    assert the_todo(longer)["X-CALAGENT-DURATION"] == "X-CALAGENT-DURATION:PT1H30M"


def test_an_unreadable_kept_object_is_written_fresh() -> None:
    mine = task()
    body = todo_body(mine, "t1@calagent", "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n", NOW, SHANGHAI)
    assert parse_todo(body, task_id="t1", tz=SHANGHAI).task == mine
    assert todo_fingerprint(mine) == todo_fingerprint(mine.model_copy(update={"id": "other"}))


FUZZ_EXAMPLES = int(os.environ.get("CALAGENT_FIDELITY_FUZZ_EXAMPLES", "200"))


@settings(max_examples=examples(FUZZ_EXAMPLES), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=rich_todos(uid="fuzz@example.com"), done=st.booleans(), title=st.booleans())
def test_a_changed_task_keeps_every_property_nobody_asked_to_change(
    body: str, done: bool, title: bool
) -> None:
    read = parse_todo(body, task_id="t1", tz=SHANGHAI).task
    changes: dict[str, object] = {}
    touched = set(STAMPS)
    if done:
        changes.update(status="done", percent=100, completed_at=NOW)
        touched |= {"STATUS", "PERCENT-COMPLETE", "COMPLETED"}
    else:
        changes.update(priority=read.priority % 4 + 1)
        touched |= {"PRIORITY"}
    if title:
        changes.update(title=read.title + " 改")
        touched |= {"SUMMARY"}
    changed = read.model_copy(update=changes)
    written = patch_todo(body, changed, NOW, SHANGHAI)
    [before], [after] = vtodos(body), vtodos(written.text)
    assert property_lines(after, touched) == property_lines(before, touched)
    assert alarm_lines(after) == alarm_lines(before)
    assert kept_lines(written.text, touched) == kept_lines(body, touched)
    assert sequence(after) == sequence(before) + 1
    assert todo_fingerprint(parse_todo(written.text, task_id="t1", tz=SHANGHAI).task) == todo_fingerprint(
        changed
    )
    assert len(Calendar.from_ical(written.text).subcomponents) == len(Calendar.from_ical(body).subcomponents)


def test_a_block_names_its_tasks_vtodo_as_parent_and_another_event_names_none() -> None:
    block = Event(
        id="b1",
        user_id="u",
        title="季度报告",
        start=datetime(2026, 9, 25, 2, tzinfo=UTC),
        end=datetime(2026, 9, 25, 3, tzinfo=UTC),
        calendar="Work",
        task_id="t9",
    )
    written = render_resource([block], "b1@calagent", NOW, {"t9": "A1B2-report@example.com"})
    assert written is not None
    [vevent] = Calendar.from_ical(written).walk("VEVENT")
    assert str(vevent.content_line("RELATED-TO", vevent["RELATED-TO"])) == (
        "RELATED-TO;RELTYPE=PARENT:A1B2-report@example.com"
    )
    # A task made here is known by the UID its VTODO is given: `<id>@calagent`.
    fresh = render_resource([block], "b1@calagent", NOW)
    assert fresh is not None and "RELATED-TO;RELTYPE=PARENT:t9@calagent" in fresh
    plain = render_resource([block.evolve(task_id=None)], "b1@calagent", NOW)
    assert plain is not None and "RELATED-TO" not in plain
