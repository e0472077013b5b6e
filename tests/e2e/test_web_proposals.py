"""The page's cards for times proposed to someone outside and for the time they chose (contract
§20) in headless Chromium: the proposal card names whom it goes to, their zone and each slot; its
confirm mails them once (the SMTP sink reads it); the booking card marks the slot they chose, and
its confirm sends the invitation. Each step is followed by an unrelated message; axe stays clean."""

from __future__ import annotations

import asyncio

import pytest
from playwright.async_api import Browser, expect

from calagent.cli.stack import Stack
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import on_user
from .test_inbound import active_stub, receiver_port, send, sink
from .test_people import Sink, add_contact, eventually, mail_address
from .test_proposals import ASK, lines_of, proposing, reply_to
from .test_web import Tab, browser, catalogs, new_tab, tabs
from .test_web_invitations import base_url, press, stack

pytestmark = pytest.mark.e2e

__all__ = ["base_url", "browser", "catalogs", "receiver_port", "sink", "stack", "tabs"]


def proposals_to(sink: Sink, who: str) -> list[str]:
    return [str(m.message["Subject"]) for m in sink.to(who)]


async def test_a_proposal_and_the_time_chosen_are_confirmed_from_their_cards(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    sink: Sink,
    receiver_port: int,
    user: str,
    tabs: list[Tab],
) -> None:
    wang5 = f"wang5-{user}@example.com"
    await add_contact(stack, user, "王五", wang5)
    scripted.set_script(proposing(on_user("今天天气", text="晴。")))
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)

    asked = await tab.send(ASK)
    assert asked["outcome"] == "held", asked
    card = tab.page.locator("#card")
    offered = await active_stub(stack, user)
    assert offered is not None and offered["kind"] == "proposal"
    await expect(card).to_have_attribute("data-command-id", offered["id"])
    await expect(card.locator('[data-fact="attendee"]')).to_have_text(wang5)
    slots = card.locator(".slot-list li")
    await expect(slots).to_have_count(len(offered["proposal"]["slots"]))
    await expect(card.locator('[data-chosen="true"]')).to_have_count(0)
    assert await tab.axe() == []

    # An unrelated message mails nothing.
    await tab.send("今天天气怎么样")
    await asyncio.sleep(0.3)
    assert sink.to(wang5) == []

    confirmed = await press(tab, card.locator("button.confirm"))
    assert confirmed["outcome"] == "created", confirmed
    await eventually(lambda: _count(sink, wang5, 1), "the proposal mailed once")
    [mail] = sink.to(wang5)

    # The attendee names the second slot; the booking card marks it.
    address = await mail_address(stack, user)
    await send(
        receiver_port,
        reply_to(mail, wang5, address, "2\n\n> " + "\n> ".join(lines_of(mail))),
        mail_from=wang5,
        rcpt=address,
    )

    async def booking() -> bool:
        stub = await active_stub(stack, user)
        return stub is not None and stub["kind"] == "booking"

    await eventually(booking, "the booking offer")
    await tab.page.reload()
    await expect(tab.page.locator("#app")).to_be_visible()
    await expect(card.locator('[data-chosen="true"]')).to_have_attribute("data-slot", "2")
    assert await tab.axe() == []
    booked = await press(tab, card.locator("button.confirm"))
    assert booked["outcome"] == "created", booked
    await eventually(lambda: _count(sink, wang5, 2), "the invitation")
    await tab.send("今天天气怎么样")
    await asyncio.sleep(0.3)
    assert len(sink.to(wang5)) == 2


async def _count(sink: Sink, who: str, n: int) -> bool:
    return len(sink.to(who)) == n
