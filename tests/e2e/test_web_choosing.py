"""The page's card for a change asking which event (contract §20) in headless Chromium: the events
found for the same words are buttons; one sends its number as the card's answer and code picks it
with no model call; the card then offers that change alone, and Confirm moves exactly that event."""

from __future__ import annotations

import pytest
from playwright.async_api import Browser, expect

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script
from .test_web import Tab, base_url, browser, catalogs, create, new_tab, stack, tabs

pytestmark = pytest.mark.e2e

__all__ = ["base_url", "browser", "catalogs", "stack", "tabs"]  # fixtures shared with test_web

THREE, FIVE = "2026-09-25T15:00:00+08:00", "2026-09-25T17:00:00+08:00"


async def test_the_events_a_change_asks_about_are_buttons_and_one_picks_with_no_model(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    for clock, words in (("15:00", "明天下午三点和张三的会"), ("17:00", "明天下午五点和张三的会")):
        scripted.set_script(script(on_user(words, tool_calls=[create("和张三的会", "D+1", clock)])))
        assert (await stack.chat(user, words)).json()["outcome"] == "created"
    found = await read_events(stack, user)
    three = next(e for e in found if e["start"] == THREE)
    five = next(e for e in found if e["start"] == FIVE)
    # The model finds both and picks the one the user did not mean.
    scripted.set_script(
        script(
            on_user("改到后天", tool_calls=[call("find_events", start="D+1", end="D+2", text="张三")]),
            {
                "when": {"last_role": "tool", "last_tool": "find_events"},
                "respond": {"tool_calls": [call("update_schedule", event_id=three["id"], date="D+2")]},
            },
        )
    )
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    assert (await tab.send("把明天和张三的会改到后天"))["outcome"] == "held"
    card = page.locator("#card")
    await expect(card).to_have_attribute("data-status", "held")
    await expect(card.locator(".why")).to_have_text(catalogs["zh"]["card.why.which_event"])
    choices = card.locator("button[data-event-id]")
    await expect(choices).to_have_count(2)
    # Each sends its number as a person would type it in the page's language.
    ordinal = catalogs["zh"]["reply.ordinal"]
    assert await choices.evaluate_all("bs => bs.map(b => [b.dataset.eventId, b.dataset.sends])") == [
        [three["id"], ordinal.replace("{n}", "1")],
        [five["id"], ordinal.replace("{n}", "2")],
    ]
    # Nothing to confirm while it asks which, and no change shown before it is known.
    await expect(card.locator("button.confirm")).to_have_count(0)
    await expect(card.locator(".change")).to_have_count(0)
    assert await tab.low_contrast() == []
    await tab.shot("card-which-event")

    asked = len(scripted.requests)
    before = await page.locator(".message.assistant").count()
    await choices.nth(1).click()
    answer = await tab.answer(before)
    assert (answer["outcome"], answer["model_calls"]) == ("held", "0")
    assert len(scripted.requests) == asked
    await expect(card.locator("button[data-event-id]")).to_have_count(0)
    await expect(card.locator(".why")).to_have_text(catalogs["zh"]["card.why.change_confirmation"])
    await expect(card.locator(".change")).to_be_visible()
    # The receipt is in the page's language, like the words the button sent.
    await expect(page.locator(".message.user").last.locator(".text")).to_have_text(
        ordinal.replace("{n}", "2")
    )
    assert sorted(e["start"] for e in await read_events(stack, user)) == [THREE, FIVE]
    await tab.shot("card-which-event-picked")

    before = await page.locator(".message.assistant").count()
    await card.locator("button.confirm").click()
    done = await tab.answer(before)
    assert (done["outcome"], done["model_calls"]) == ("updated", "0")
    moved = {e["id"]: e["start"] for e in await read_events(stack, user)}
    assert moved == {three["id"]: THREE, five["id"]: "2026-09-26T17:00:00+08:00"}
    await expect(card).to_be_hidden()
