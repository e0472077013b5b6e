"""The page's tasks beside the week (contract §21) in headless Chromium against the real system: each
task with its due and, when its minutes do not fit before it, the minutes missing; a block of a
task drawn as one and labelled with the task's title; the checkbox completes a task through the
API. Every state looked at is checked with axe-core (`Tab.shot`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from playwright.async_api import Browser, expect

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, script
from .test_web import Tab, base_url, browser, catalogs, new_tab, stack, tabs
from .test_web_invitations import press

pytestmark = pytest.mark.e2e

__all__ = ["base_url", "browser", "catalogs", "stack", "tabs"]  # fixtures shared with test_web

# The stack's clock: Thursday 2026-09-24 10:00 in Shanghai; the deployment works 09:00–18:00.
FRIDAY_EVENING = "2026-09-25T18:00:00+08:00"


async def add_task(stack: Stack, user: str, **body: Any) -> dict[str, Any]:
    response = await stack.client.post("/v1/tasks", json=body, headers=stack.headers(user))
    assert response.status_code == 201, response.text
    made: dict[str, Any] = response.json()
    return made


async def test_tasks_beside_the_week_show_risk_blocks_and_complete_with_the_checkbox(
    browser: Browser,
    base_url: str,
    stack: Stack,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    report = await add_task(stack, user, title="季度报告", duration_minutes=120, due=FRIDAY_EVENING)
    # Thursday 10:00–18:00 and Friday 09:00–18:00 hold 17 hours: 20 cannot fit.
    huge = await add_task(stack, user, title="翻译手册", duration_minutes=1200, due=FRIDAY_EVENING)
    assert huge["at_risk"] and huge["missing_minutes"] > 0
    # Placing wrote the report's blocks (and the translation's, as many as fit): read them back.
    blocks = await blocks_of(stack, user, report["id"])
    assert blocks and all(e["kind"] == "task_block" for e in blocks)
    first_day = blocks[0]["start"][:10]
    # Planned together with the report and around its block, as the page's list reads them.
    listed = (await stack.client.get("/v1/tasks", headers=stack.headers(user))).json()["tasks"]
    missing = next(t["missing_minutes"] for t in listed if t["id"] == huge["id"])
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    items = page.locator("#tasks-list .task")
    await expect(items).to_have_count(2)
    at_risk = page.locator(f'#tasks-list .task[data-task-id="{huge["id"]}"]')
    await expect(at_risk).to_have_class("task at-risk")
    risk = catalogs["zh"]["tasks.at_risk"].replace("{n}", str(missing))
    await expect(at_risk.locator(".tag.risk")).to_have_text(risk)
    mine = page.locator(f'#tasks-list .task[data-task-id="{report["id"]}"]')
    await expect(mine.locator(".due")).to_contain_text("18:00")
    await expect(mine.locator(".tag.risk")).to_have_count(0)

    on_day = [e for e in blocks if e["start"][:10] == first_day]
    block = page.locator(
        f'#week-days .day[data-date="{first_day}"] .event.task-block[data-task-id="{report["id"]}"]'
    )
    await expect(block).to_have_count(len(on_day))
    label = catalogs["zh"]["week.task_block"].replace("{title}", "季度报告")
    await expect(block.first.locator(".tag.task")).to_have_text(label)
    await tab.shot("tasks-beside-the-week")

    # Done with the checkbox (its label is the title): the API says so, and the list shows it.
    await page.get_by_label("季度报告").check()
    await expect(mine).to_have_attribute("data-status", "done")
    listed = (await stack.client.get("/v1/tasks", headers=stack.headers(user))).json()["tasks"]
    assert {t["id"]: (t["status"], t["percent"]) for t in listed} == {
        report["id"]: ("done", 100),
        huge["id"]: ("open", 0),
    }
    await expect(page.get_by_label("季度报告")).to_be_checked()
    await tab.shot("tasks-one-done")


async def test_a_replan_offer_is_a_card_listing_each_block_and_moves_them_only_when_confirmed(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    scripted.set_script(
        script(on_user("确认", tool_calls=[call("confirm_command")]), default="今天天气我查不到。")
    )
    report = await add_task(stack, user, title="季度报告", duration_minutes=240, due=FRIDAY_EVENING)
    placed = await blocks_of(stack, user, report["id"])
    # A meeting at 11:00 today, where placing put the report's first block.
    made = await stack.client.post(
        "/v1/commands",
        json={
            "tool": "prepare_or_create_schedule",
            "arguments": {"title": "开会", "date": "D", "time": "11:00"},
        },
        headers=stack.headers(user),
    )
    assert made.json()["outcome"] == "created", made.text
    offer = (await stack.client.get("/v1/commands/active", headers=stack.headers(user))).json()
    assert offer is not None and offer["kind"] == "replan", offer
    moves = offer["replan"]["moves"]

    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    card = tab.page.locator("#card")
    await expect(card).to_have_attribute("data-command-id", offer["id"])
    rows = card.locator(".replan .move-list li")
    await expect(rows).to_have_count(len(moves))
    for move in moves:
        row = card.locator(f'.replan .move-list li[data-block-id="{move["block_id"] or ""}"]')
        await expect(row.locator("strong")).to_have_text("季度报告")
        if move["new_start"] is None:
            await expect(row.locator(".after")).to_have_text(catalogs["zh"]["card.replan.removed"])
    await tab.shot("replan-card")

    # The next, unrelated message moves nothing and leaves the card.
    await tab.send("今天天气怎么样")
    assert await blocks_of(stack, user, report["id"]) == placed
    await expect(card).to_have_attribute("data-command-id", offer["id"])

    confirmed = await press(tab, card.locator("button.confirm"))
    assert confirmed["outcome"] == "updated", confirmed
    moved = {(b["start"], b["end"]) for b in await blocks_of(stack, user, report["id"])}
    kept = {(b["start"], b["end"]) for b in placed if b["id"] not in {m["block_id"] for m in moves}}
    offered = {(m["new_start"], m["new_end"]) for m in moves if m["new_start"] is not None}
    assert {(at(s), at(e)) for s, e in moved} == {(at(s), at(e)) for s, e in kept | offered}


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def blocks_of(stack: Stack, user: str, task_id: str) -> list[dict[str, Any]]:
    shown = await stack.client.get(
        "/v1/events",
        params={"start": "2026-09-24T00:00:00+08:00", "end": "2026-09-26T00:00:00+08:00"},
        headers=stack.headers(user),
    )
    assert shown.status_code == 200, shown.text
    return [e for e in shown.json()["events"] if e.get("task_id") == task_id]
