"""The page's tasks beside the week (contract §21) in headless Chromium against the real system: each
task with its due and, when its minutes do not fit before it, the minutes missing; a block of a
task drawn as one and labelled with the task's title; the checkbox completes a task through the
API. Every state looked at is checked with axe-core (`Tab.shot`)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import Browser, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.cli.stack import Stack

from .test_web import Tab, base_url, browser, catalogs, new_tab, stack, tabs

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
    db: AsyncEngine,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    report = await add_task(stack, user, title="季度报告", duration_minutes=120, due=FRIDAY_EVENING)
    # Thursday 10:00–18:00 and Friday 09:00–18:00 hold 17 hours: 20 cannot fit.
    huge = await add_task(stack, user, title="翻译手册", duration_minutes=1200, due=FRIDAY_EVENING)
    assert huge["at_risk"] and huge["missing_minutes"] > 0
    # Placing wrote the report's blocks (and the translation's, as many as fit): read them back.
    shown = await stack.client.get(
        "/v1/events",
        params={"start": "2026-09-24T00:00:00+08:00", "end": "2026-09-26T00:00:00+08:00"},
        headers=stack.headers(user),
    )
    assert shown.status_code == 200, shown.text
    blocks = [e for e in shown.json()["events"] if e.get("task_id") == report["id"]]
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
