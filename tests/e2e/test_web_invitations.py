"""The page's card for an invitation received by mail (contract §16) in headless Chromium.

A real iMIP message goes over SMTP on loopback to the gateway's receiver, the page shows the offer,
and its buttons answer it; the facts are read back — `GET /v1/events`, the REPLY the organizer's
SMTP sink received (parsed with `icalendar`), and the scripted model's request log (no call)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, tzinfo
from typing import Any

import pytest
from playwright.async_api import Browser, Locator, expect

from calagent.cli.stack import Stack, start_stack
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script
from .test_inbound import (
    MAIL_DOMAIN,
    SHANGHAI,
    active_stub,
    calendar_of,
    check_reply,
    message,
    receiver_port,
    send,
    sink,
)
from .test_people import Sink, add_contact, eventually, mail_address
from .test_web import Tab, browser, catalogs, new_tab, served_gateway, tabs

pytestmark = pytest.mark.e2e

__all__ = ["browser", "catalogs", "receiver_port", "sink", "tabs"]  # fixtures shared with other tests


@pytest.fixture(scope="module")
async def stack(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, sink: Sink, receiver_port: int
) -> AsyncIterator[Stack]:
    system = await start_stack(
        nats_url=servers.nats_url,
        nats_url_for=servers.nats_url_for,
        database_url=database_url,
        model_base_url=scripted.base_url,
        settings_overrides={
            "CALAGENT_WEB_DEV_SIGNIN": True,
            "CALAGENT_SMTP_URL": f"smtp://127.0.0.1:{sink.port}",
            "CALAGENT_SMTP_LISTEN": f"127.0.0.1:{receiver_port}",
            "CALAGENT_MAIL_DOMAIN": MAIL_DOMAIN,
        },
    )
    yield system
    await system.stop()


@pytest.fixture(scope="module")
async def base_url(stack: Stack) -> AsyncIterator[str]:
    async with served_gateway(stack, "invitations-gateway") as url:
        yield url


class Organizer:
    """Someone who mails the user's private address invitations: a contact once `known()`, or
    someone not in the contacts once `unknown()`."""

    def __init__(self, stack: Stack, receiver_port: int, user: str, name: str = "boss") -> None:
        self.stack = stack
        self.port = receiver_port
        self.user = user
        self.email = f"{name}-{user}@example.com"
        self.peer = f"peer-{user}@example.com"
        self.address = ""

    async def known(self) -> None:
        self.address = await mail_address(self.stack, self.user)
        await add_contact(self.stack, self.user, "老板", self.email)

    async def unknown(self) -> None:
        self.address = await mail_address(self.stack, self.user)

    async def post(
        self, method: str, uid: str, *, title: str, sequence: int = 0, day: int = 28, zone: tzinfo = SHANGHAI
    ) -> None:
        """The message sent, whatever becomes of it."""
        # 14:00 in Shanghai, written in the organizer's zone.
        start = datetime(2026, 9, day, 14, 0, tzinfo=SHANGHAI).astimezone(zone)
        cal = calendar_of(
            method,
            uid=uid,
            organizer=self.email,
            attendees=[(self.address, "NEEDS-ACTION"), (self.peer, "NEEDS-ACTION")],
            sequence=sequence,
            start=start,
            title=title,
        )
        mail = message(self.email, self.address, cal=cal)
        await send(self.port, mail, mail_from=self.email, rcpt=self.address)

    async def mail(
        self, method: str, uid: str, *, title: str, sequence: int = 0, day: int = 28, zone: tzinfo = SHANGHAI
    ) -> None:
        """The message sent, once it is the user's offer."""
        await self.post(method, uid, title=title, sequence=sequence, day=day, zone=zone)

        async def offered() -> bool:
            stub = await active_stub(self.stack, self.user)
            return stub is not None and (stub["invitation"]["uid"], stub["invitation"]["method"]) == (
                uid,
                method,
            )

        await eventually(offered, f"the {method} to be offered")

    async def invite(self, title: str, *, day: int = 28, zone: tzinfo = SHANGHAI) -> str:
        uid = f"{uuid.uuid4()}@example.com"
        await self.mail("REQUEST", uid, title=title, day=day, zone=zone)
        return uid


async def shows_invitation(card: Locator, organizer: Organizer, method: str, title: str) -> None:
    await expect(card).to_have_attribute("data-method", method)
    await expect(card.locator('[data-fact="organizer"]')).to_have_text(organizer.email)
    await expect(card.locator('[data-fact="title"]')).to_have_text(title)
    people = card.locator('[data-fact="attendees"] li')
    await expect(people).to_have_count(2)
    assert await people.evaluate_all("ps => ps.map(p => p.dataset.email)") == [
        organizer.address,
        organizer.peer,
    ]


async def press(tab: Tab, button: Locator) -> dict[str, str]:
    """The button pressed from the keyboard; the facts of the turn it made."""
    count = await tab.page.locator(".message.assistant").count()
    await button.focus()
    await tab.page.keyboard.press("Enter")
    return await tab.answer(count)


async def press_answering(tab: Tab, button: Locator) -> tuple[dict[str, str], dict[str, Any]]:
    """The button pressed; the facts of the turn it made and the chat message it sent."""
    async with tab.page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/v1/chat")) as sent:
        facts = await press(tab, button)
    body = (await sent.value).post_data_json
    assert isinstance(body, dict)
    return facts, body


async def waiting_offers(stack: Stack, user: str) -> list[dict[str, Any]]:
    response = await stack.client.get("/v1/commands/waiting", headers=stack.headers(user))
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["commands"]
    return found


async def test_an_invitation_is_accepted_and_another_declined_from_its_card_without_the_model(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    sink: Sink,
    receiver_port: int,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    organizer = Organizer(stack, receiver_port, user)
    await organizer.known()
    first = await organizer.invite("季度评审")
    asked = len(scripted.requests)

    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    card = tab.page.locator("#card")
    await shows_invitation(card, organizer, "REQUEST", "季度评审")
    # "2026-09-28T14:00+08:00" in the user's zone, Asia/Shanghai.
    await expect(card.locator('[data-fact="when"]')).to_contain_text("14:00–15:00")
    answers = {
        "accept": card.locator("button.accept"),
        "tentative": card.locator("button.tentative"),
        "decline": card.locator("button.decline"),
    }
    for word, button in answers.items():
        assert await button.get_attribute("data-sends") == catalogs["zh"][f"reply.{word}"]
    await expect(card.locator("button.cancel")).to_be_visible()
    await tab.shot("invitation", "web-invitation.png")

    # Someone the user knows: the card says nothing about the sender beyond who they are.
    await expect(card.locator('[data-fact="stranger"]')).to_have_count(0)
    offered = await active_stub(stack, user)
    assert offered is not None
    await expect(card).to_have_attribute("data-command-id", offered["id"])

    # The answer names the offer it answers (contract §19): the card's own id.
    accepted, sent = await press_answering(tab, answers["accept"])
    assert (sent["message"], sent["active_command_id"]) == (catalogs["zh"]["reply.accept"], offered["id"])
    assert (accepted["outcome"], accepted["model_calls"]) == ("created", "0")
    await expect(card).to_be_hidden()
    [event] = await read_events(stack, user)
    assert (event["uid"], event["organizer"]) == (first, organizer.email)
    await eventually(lambda: len(sink.to(organizer.email)) == 1, "the ACCEPTED reply")
    check_reply(
        sink.to(organizer.email)[0],
        uid=first,
        organizer=organizer.email,
        attendee=organizer.address,
        partstat="ACCEPTED",
        sequence=0,
    )

    # A second invitation, written in UTC, reaches the open page on its next load, shown at the
    # user's wall-clock time, and is declined from the card.
    second = await organizer.invite("预算会", day=29, zone=UTC)
    await tab.page.reload()
    await shows_invitation(card, organizer, "REQUEST", "预算会")
    await expect(card.locator('[data-fact="when"]')).to_contain_text("14:00–15:00")
    count = await tab.page.locator(".message.assistant").count()
    await card.locator("button.decline").click()
    declined = await tab.answer(count)
    assert declined["model_calls"] == "0"
    await expect(card).to_be_hidden()
    assert [e["uid"] for e in await read_events(stack, user)] == [first]
    await eventually(lambda: len(sink.to(organizer.email)) == 2, "the DECLINED reply")
    check_reply(
        sink.to(organizer.email)[1],
        uid=second,
        organizer=organizer.email,
        attendee=organizer.address,
        partstat="DECLINED",
        sequence=0,
    )
    await asyncio.sleep(1.0)  # the outbox's sweeps: each answer leaves once
    assert len(sink.to(organizer.email)) == 2
    assert len(scripted.requests) == asked


async def test_a_cancelled_invitation_is_removed_with_its_confirm_or_kept_with_its_cancel(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    sink: Sink,
    receiver_port: int,
    user: str,
    tabs: list[Tab],
) -> None:
    organizer = Organizer(stack, receiver_port, user)
    await organizer.known()
    kept = await organizer.invite("周会", day=28)
    assert (await stack.chat(user, "接受")).json()["outcome"] == "created"
    removed = await organizer.invite("评审", day=29)
    assert (await stack.chat(user, "接受")).json()["outcome"] == "created"
    await eventually(lambda: len(sink.to(organizer.email)) == 2, "both replies")
    asked = len(scripted.requests)

    await organizer.mail("CANCEL", removed, title="评审", sequence=1, day=29)
    tab = await new_tab(browser, base_url, tabs, locale="en-US")
    await tab.sign_in(user)
    card = tab.page.locator("#card")
    await shows_invitation(card, organizer, "CANCEL", "评审")
    await expect(card.locator("button.accept")).to_have_count(0)
    await tab.shot("invitation-cancelled")
    answer = await press(tab, card.locator("button.confirm"))
    assert (answer["outcome"], answer["model_calls"]) == ("deleted", "0")
    assert [e["uid"] for e in await read_events(stack, user)] == [kept]

    await organizer.mail("CANCEL", kept, title="周会", sequence=1, day=28)
    await tab.page.reload()
    await shows_invitation(card, organizer, "CANCEL", "周会")
    answer = await press(tab, card.locator("button.cancel"))
    assert answer["model_calls"] == "0"
    await expect(card).to_be_hidden()
    assert [e["uid"] for e in await read_events(stack, user)] == [kept]
    assert len(scripted.requests) == asked
    assert len(sink.to(organizer.email)) == 2, "a cancellation is not answered"


async def test_an_invitation_from_someone_not_in_the_contacts_says_so_on_its_card(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    sink: Sink,
    receiver_port: int,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    stranger = Organizer(stack, receiver_port, user, name="stranger")
    await stranger.unknown()
    uid = await stranger.invite("陌生人的会")
    offered = await active_stub(stack, user)
    assert offered is not None and offered["invitation"]["sender_known"] is False
    asked = len(scripted.requests)

    tab = await new_tab(browser, base_url, tabs, locale="en-US")
    await tab.sign_in(user)
    card = tab.page.locator("#card")
    await shows_invitation(card, stranger, "REQUEST", "陌生人的会")
    marked = card.locator('[data-fact="stranger"]')
    await expect(marked).to_be_visible()
    await expect(marked).to_have_attribute("data-i18n", "card.invite.stranger")
    await tab.shot("invitation-stranger")

    declined, sent = await press_answering(tab, card.locator("button.decline"))
    assert (sent["message"], sent["active_command_id"]) == (catalogs["en"]["reply.decline"], offered["id"])
    assert (declined["outcome"], declined["model_calls"]) == ("cancelled", "0")
    await expect(card).to_be_hidden()
    assert await read_events(stack, user) == []
    await eventually(lambda: len(sink.to(stranger.email)) == 1, "the DECLINED reply")
    check_reply(
        sink.to(stranger.email)[0],
        uid=uid,
        organizer=stranger.email,
        attendee=stranger.address,
        partstat="DECLINED",
        sequence=0,
    )
    assert len(scripted.requests) == asked


async def test_each_offer_waiting_beside_the_users_own_request_has_a_card_that_answers_it_by_id(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    receiver_port: int,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    scripted.set_script(
        script(on_user("理发", tool_calls=[call("prepare_or_create_schedule", title="理发", date="D+1")]))
    )
    own = (await stack.chat(user, "明天去理发")).json()
    assert own["outcome"] == "needs_time", own
    boss = Organizer(stack, receiver_port, user)
    await boss.known()
    stranger = Organizer(stack, receiver_port, user, name="stranger")
    await stranger.unknown()
    boss_uid = f"{uuid.uuid4()}@example.com"
    await boss.post("REQUEST", boss_uid, title="季度评审", day=28)
    await stranger.post("REQUEST", f"{uuid.uuid4()}@example.com", title="陌生人的会", day=29)

    async def both_wait() -> bool:
        return len(await waiting_offers(stack, user)) == 2

    await eventually(both_wait, "both invitations waiting")
    waiting = await waiting_offers(stack, user)
    assert (await active_stub(stack, user) or {}).get("id") == own["command"]["id"], "the user's own stays"

    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    await expect(tab.page.locator("#card")).to_have_attribute("data-command-id", own["command"]["id"])
    cards = tab.page.locator("#waiting .card")
    await expect(cards).to_have_count(2)
    assert await cards.evaluate_all("cs => cs.map(c => c.dataset.commandId)") == [w["id"] for w in waiting]
    for card, organizer, title in zip(
        (cards.nth(0), cards.nth(1)), (boss, stranger), ("季度评审", "陌生人的会"), strict=True
    ):
        await shows_invitation(card, organizer, "REQUEST", title)
        # Each answer names its own offer, not the request the conversation is on.
        for word in ("accept", "tentative", "decline"):
            button = card.locator(f"button.{word}")
            assert await button.get_attribute("data-sends") == catalogs["zh"][f"reply.{word}"]
            assert await button.get_attribute("data-answers") == await card.get_attribute("data-command-id")
    await expect(cards.nth(0).locator('[data-fact="stranger"]')).to_have_count(0)
    await expect(cards.nth(1).locator('[data-fact="stranger"]')).to_be_visible()
    await tab.shot("invitations-waiting")

    # A waiting card answers its own offer, without the model; the user's request stays theirs.
    accepted, sent = await press_answering(tab, cards.nth(0).locator("button.accept"))
    assert sent["active_command_id"] == waiting[0]["id"]
    assert (accepted["outcome"], accepted["model_calls"]) == ("created", "0")
    assert [e["uid"] for e in await read_events(stack, user)] == [boss_uid]
    assert (await active_stub(stack, user) or {}).get("id") == own["command"]["id"]
    await expect(tab.page.locator("#card")).to_have_attribute("data-command-id", own["command"]["id"])
    await expect(cards).to_have_count(1)
    assert await cards.evaluate_all("cs => cs.map(c => c.dataset.commandId)") == [waiting[1]["id"]]

    # The user's own request ends from its card: the page shows every offer once, the one now
    # in the conversation on its card and the rest beside it.
    count = await tab.page.locator(".message.assistant").count()
    await tab.page.locator("#card button.cancel").click()
    assert (await tab.answer(count))["outcome"] == "cancelled"
    active = await active_stub(stack, user)
    beside = [w["id"] for w in await waiting_offers(stack, user) if active is None or w["id"] != active["id"]]
    if active is not None:
        await expect(tab.page.locator("#card")).to_have_attribute("data-command-id", active["id"])
    await expect(cards).to_have_count(len(beside))
    assert await cards.evaluate_all("cs => cs.map(c => c.dataset.commandId)") == beside
    await tab.shot("invitations-waiting-after")
