"""The page's settings panel and the people on it (contract §18, §16, §12, §10) in headless Chromium
against the real running system: a CalDAV server (Radicale) to connect, contacts to choose among,
the scripted model behind its HTTP port. Every setting the panel saves is read back over HTTP;
every state a test looks at is checked with axe-core (`Tab.shot`)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from cryptography.fernet import Fernet
from icalendar import Calendar, Event, vCalAddress
from playwright.async_api import Browser, Page, expect

from calagent.cli.stack import Stack, start_stack
from calagent.devtools.radicale import EmbeddedRadicale, make_calendar
from calagent.devtools.testing.servers import Servers
from calagent.scriptedmodel import ScriptedModelServer

from .caldav_support import ALLOW_NETWORKS, radicale_server
from .conftest import call, on_user, read_events, script
from .test_caldav import Remote, commands_app, connect, eventually
from .test_sync_faults import connected_through_proxy
from .test_web import HEADER_ROWS, PHONE, Tab, browser, catalogs, new_tab, served_gateway, tabs

pytestmark = pytest.mark.e2e

__all__ = ["browser", "catalogs", "tabs"]  # fixtures shared with the page's other browser tests

MAIL_DOMAIN = "mail.test"
SHANGHAI = ZoneInfo("Asia/Shanghai")


# ---- the system: connected calendars on, the page's development sign-in on -------------------------


@pytest.fixture(scope="module")
def radicale() -> Iterator[EmbeddedRadicale]:
    with radicale_server() as server:
        yield server


@pytest.fixture(scope="module")
async def stack(
    servers: Servers, database_url: str, scripted: ScriptedModelServer, radicale: EmbeddedRadicale
) -> AsyncIterator[Stack]:
    with tempfile.TemporaryDirectory(prefix="calagent-data-") as data_dir:
        system = await start_stack(
            nats_url=servers.nats_url,
            nats_url_for=servers.nats_url_for,
            database_url=database_url,
            model_base_url=scripted.base_url,
            settings_overrides={
                "CALAGENT_WEB_DEV_SIGNIN": True,
                "CALAGENT_DATA_DIR": data_dir,
                "CALAGENT_CREDENTIALS_KEY": Fernet.generate_key().decode(),
                "CALAGENT_CALDAV_SWEEP_S": 0.2,
                # Inbound sync runs when a test asks for it.
                "CALAGENT_CALDAV_SYNC_S": 3600,
                ALLOW_NETWORKS: radicale.network,
                "CALAGENT_MAIL_DOMAIN": MAIL_DOMAIN,
            },
        )
        yield system
        await system.stop()


@pytest.fixture(scope="module")
async def base_url(stack: Stack) -> AsyncIterator[str]:
    async with served_gateway(stack, "web-settings-gateway") as url:
        yield url


def remote_account(radicale: EmbeddedRadicale, user: str, *calendars: str) -> Remote:
    """A user of the CalDAV server with calendars of these names; the first is the one to write to."""
    name, password = f"r-{user}", f"app-password-{user}"
    radicale.add_user(name, password)
    urls = [make_calendar(radicale.url, name, password, calendar) for calendar in calendars]
    return Remote(radicale.user_url(name), name, password, urls[0])


async def get_json(stack: Stack, user: str, path: str) -> Any:
    response = await stack.client.get(path, headers=stack.headers(user))
    assert response.status_code == 200, response.text
    return response.json()


def shared_with(sharing: dict[str, Any]) -> list[str]:
    return [share["user"] for share in sharing["shared_with"]]


def shared_with_me(sharing: dict[str, Any]) -> list[str]:
    return [share["user"] for share in sharing["shared_with_me"]]


async def open_settings(page: Page) -> None:
    """From the header, with the keyboard: the button, Enter."""
    await page.focus("#settings-open")
    await page.keyboard.press("Enter")
    await expect(page.locator("#settings")).to_be_visible()


# ---- connected calendars ----------------------------------------------------------------------------


async def test_a_calendar_account_is_connected_its_default_chosen_and_it_is_disconnected(
    browser: Browser, base_url: str, stack: Stack, radicale: EmbeddedRadicale, user: str, tabs: list[Tab]
) -> None:
    remote = remote_account(radicale, user, "Personal", "Work")
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    await open_settings(page)
    await expect(page.locator("#accounts-empty")).to_be_visible()
    await page.fill("#account-url", remote.url)
    await page.fill("#account-user", remote.username)
    await page.fill("#account-password", remote.password)
    await page.click("#account-form button[type=submit]")
    item = page.locator("#accounts-list .account")
    await expect(item).to_have_count(1)

    [account] = (await get_json(stack, user, "/v1/accounts"))["accounts"]
    assert (account["url"], account["username"]) == (remote.url, remote.username)
    await expect(item).to_have_attribute("data-account-id", account["id"])
    # The password left the form and is shown nowhere.
    assert await page.input_value("#account-password") == ""
    assert remote.password not in await page.content()
    calendars = {c["url"]: c for c in account["calendars"]}
    assert len(calendars) == 2
    [first_default] = [url for url, c in calendars.items() if c["default"]]
    [other] = [url for url in calendars if url != first_default]
    await expect(item.locator("input[type=radio]")).to_have_count(2)
    await expect(item.locator(f'input[data-calendar-url="{first_default}"]')).to_be_checked()

    # Choosing the other calendar makes it the default on the server.
    await item.locator(f'input[data-calendar-url="{other}"]').check()

    async def default_moved() -> bool:
        [now] = (await get_json(stack, user, "/v1/accounts"))["accounts"]
        return [c["url"] for c in now["calendars"] if c["default"]] == [other]

    await eventually(default_moved, "the chosen calendar to be the default")
    await expect(page.locator(f'#accounts-list input[data-calendar-url="{other}"]')).to_be_checked()
    await tab.shot("settings-account")

    await page.locator("#accounts-list .account button.disconnect").click()
    await expect(page.locator("#accounts-list .account")).to_have_count(0)
    assert (await get_json(stack, user, "/v1/accounts"))["accounts"] == []
    await expect(page.locator("#accounts-empty")).to_be_visible()


async def test_an_accounts_health_shows_its_last_sync_its_last_error_and_what_waits_for_an_answer(
    browser: Browser, base_url: str, stack: Stack, radicale: EmbeddedRadicale, user: str, tabs: list[Tab]
) -> None:
    """Contract §22: the settings show what GET /v1/accounts says of an account — when it last
    synced, its last error in our words, and a calendar's events kept until the user answers."""
    remote = remote_account(radicale, user, "Personal")
    async with connected_through_proxy(stack, radicale, user, remote) as (proxy, connected):
        inbound = commands_app(stack).sync.inbound  # type: ignore[union-attr]
        hrefs = [
            remote.add(f"health-{user}-{i}", f"事项{i}", f"2026092{6 + i}T010000Z", f"2026092{6 + i}T020000Z")
            for i in range(2)
        ]
        await inbound.sync_account(connected["id"])
        assert len(await read_events(stack, user)) == 2
        for href in hrefs:
            with remote.client() as client:
                client.delete(href)
        await inbound.sync_account(connected["id"])  # both gone at once: kept, the user asked
        proxy.down = True
        await inbound.sync_account(connected["id"])  # and then the server does not answer
    [account] = (await get_json(stack, user, "/v1/accounts"))["accounts"]
    [warning] = account["warnings"]

    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    await open_settings(page)
    item = page.locator("#accounts-list .account")
    await expect(item.locator('[data-fact="last_synced_at"]')).to_have_attribute(
        "data-i18n", "accounts.synced"
    )
    await expect(item.locator('[data-fact="last_error"]')).to_contain_text("could not be reached")
    shown = item.locator('[data-fact="warning"]')
    await expect(shown).to_have_attribute("data-command-id", warning["command_id"])
    await expect(shown).to_contain_text("0/2")
    await tab.shot("settings-account-health")


async def test_the_private_mail_address_is_shown_and_the_panel_fits_a_phone(
    browser: Browser, base_url: str, stack: Stack, user: str, tabs: list[Tab]
) -> None:
    tab = await new_tab(browser, base_url, tabs, viewport=PHONE)
    await tab.sign_in(user)
    page = tab.page
    # The header stays one row with the settings button in it.
    assert await page.evaluate(HEADER_ROWS) == 1
    await open_settings(page)
    await page.click("#mail-show")
    field = page.locator("#mail-address")
    await expect(field).to_have_value(re.compile(rf"@{re.escape(MAIL_DOMAIN)}$"))
    shown = await field.input_value()
    answer = await stack.client.post("/v1/mail-address", headers=stack.headers(user))
    assert answer.status_code == 200
    assert shown == answer.json()["address"]
    assert shown.endswith(f"@{MAIL_DOMAIN}")
    # Nothing wider than the screen, inside the panel or outside it.
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert await page.evaluate(
        "(() => { const d = document.getElementById('settings'); return d.scrollWidth <= d.clientWidth; })()"
    )
    await tab.shot("settings-phone")
    # Escape closes the panel and gives the focus back to the button that opened it.
    await page.keyboard.press("Escape")
    await expect(page.locator("#settings")).to_be_hidden()
    await expect(page.locator("#settings-open")).to_be_focused()


# ---- people ----------------------------------------------------------------------------------------


async def add_contact(stack: Stack, user: str, name: str, address: str) -> None:
    response = await stack.client.post(
        "/v1/contacts", json={"name": name, "email": address, "aliases": []}, headers=stack.headers(user)
    )
    assert response.status_code == 201, response.text


async def test_a_person_is_chosen_on_the_card_without_the_model_and_cancel_ends_the_wait(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    tabs: list[Tab],
) -> None:
    await add_contact(stack, user, "张伟", "zhangwei1@example.com")
    await add_contact(stack, user, "张伟", "zhangwei2@example.com")
    lunch = {"title": "午饭", "date": "D+1", "time": "12:00"}
    scripted.set_script(
        script(
            on_user(
                "吃午饭",
                tool_calls=[
                    call("prepare_or_create_schedule", **lunch, attendees=["lisi@example.org", " 张伟 "])
                ],
            ),
            on_user(
                "喝茶",
                tool_calls=[
                    call(
                        "prepare_or_create_schedule",
                        title="喝茶",
                        date="D+1",
                        time="17:00",
                        attendees=["赵六"],
                    )
                ],
            ),
        )
    )
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    card = page.locator("#card")
    assert (await tab.send("明天中午和张伟、lisi@example.org吃午饭"))["outcome"] == "needs_attendee"
    await expect(card).to_have_attribute("data-status", "needs_attendee")
    choices = card.locator("button[data-attendee]")
    await expect(choices).to_have_count(2)
    waiting = await get_json(stack, user, "/v1/commands/active")
    assert waiting["status"] == "needs_attendee"
    await tab.shot("card-needs-attendee")

    # A candidate's button answers the stub with zero model calls; the other attendee stays.
    asked = len(scripted.requests)
    count = await page.locator(".message.assistant").count()
    await card.locator('button[data-attendee="zhangwei2@example.com"]').click()
    answer = await tab.answer(count)
    assert (answer["outcome"], answer["model_calls"]) == ("held", "0")
    assert len(scripted.requests) == asked
    held = await get_json(stack, user, "/v1/commands/active")
    assert held["id"] == waiting["id"]
    assert held["hold_reason"] == "sends_invitations"
    assert sorted(p["email"] for p in held["recipients"]) == ["lisi@example.org", "zhangwei2@example.com"]
    # The held invitation's card names every recipient before anything is sent.
    await expect(card).to_have_attribute("data-status", "held")
    shown = await card.locator('[data-fact="recipients"] li').evaluate_all(
        "items => items.map(i => i.dataset.email)"
    )
    assert sorted(shown) == ["lisi@example.org", "zhangwei2@example.com"]
    await tab.shot("card-invitations")

    # Cancel ends it, without the model.
    count = await page.locator(".message.assistant").count()
    await card.locator("button.cancel").click()
    assert (await tab.answer(count))["outcome"] == "cancelled"
    assert await get_json(stack, user, "/v1/commands/active") is None

    # A name no contact has: no candidates to press; Cancel ends the wait too.
    assert (await tab.send("明天下午五点和赵六喝茶"))["outcome"] == "needs_attendee"
    await expect(card).to_have_attribute("data-status", "needs_attendee")
    await expect(card.locator("button[data-attendee]")).to_have_count(0)
    count = await page.locator(".message.assistant").count()
    await card.locator("button.cancel").click()
    answer = await tab.answer(count)
    assert (answer["outcome"], answer["model_calls"]) == ("cancelled", "0")
    await expect(card).to_be_hidden()
    assert await get_json(stack, user, "/v1/commands/active") is None
    assert await read_events(stack, user) == []
    assert len(scripted.requests) == asked + 1  # only the message that named 赵六


def invitation(uid: str, people: dict[str, str]) -> str:
    """An event someone organised, with each attendee's answer, as a calendar app stores it."""
    event = Event()
    event.add("uid", uid)
    event.add("dtstamp", datetime(2026, 9, 20, 8, 0, tzinfo=ZoneInfo("UTC")))
    event.add("dtstart", datetime(2026, 9, 25, 10, 0, tzinfo=SHANGHAI))
    event.add("dtend", datetime(2026, 9, 25, 11, 0, tzinfo=SHANGHAI))
    event.add("summary", "设计评审")
    organizer = vCalAddress("mailto:lisi@example.com")
    organizer.params["cn"] = "Li Si"
    event.add("organizer", organizer)
    for address, status in people.items():
        attendee = vCalAddress(f"mailto:{address}")
        attendee.params["partstat"] = status
        event.add("attendee", attendee)
    calendar = Calendar()
    calendar.add("prodid", "-//calagent tests//EN")
    calendar.add("version", "2.0")
    calendar.add_component(event)
    body: bytes = calendar.to_ical()
    return body.decode()


async def test_an_events_details_show_its_organizer_and_each_attendees_answer(
    browser: Browser, base_url: str, stack: Stack, radicale: EmbeddedRadicale, user: str, tabs: list[Tab]
) -> None:
    remote = remote_account(radicale, user, "Personal")
    await connect(stack, user, remote)
    people = {
        "zhangsan@example.com": "ACCEPTED",
        "wangwu@example.com": "DECLINED",
        "zhaoliu@example.com": "TENTATIVE",
        "qianqi@example.com": "NEEDS-ACTION",
    }
    remote.add_raw(invitation(f"review-{user}", people))
    commands_app(stack).sync.sync_soon()  # type: ignore[union-attr]

    async def arrived() -> bool:
        return len(await read_events(stack, user)) == 1

    await eventually(arrived, "the server's event in GET /v1/events")
    [event] = await read_events(stack, user)
    assert {p["email"]: p["status"] for p in event["attendees"]} == people

    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    await page.locator(f'#week-days button.open[data-event-id="{event["id"]}"]').click()
    details = page.locator("#event-details")
    await expect(details).to_have_attribute("data-event-id", event["id"])
    await expect(details.locator('[data-fact="organizer"]')).to_contain_text("lisi@example.com")
    listed = await details.locator('[data-fact="attendees"] li').evaluate_all(
        "items => items.map(i => [i.dataset.email, i.dataset.status])"
    )
    assert dict(listed) == {address: status.lower() for address, status in people.items()}
    # Each answer is shown in words, not as the protocol's token.
    for address in people:
        badge = details.locator(f'[data-fact="attendees"] li[data-email="{address}"] .badge')
        await expect(badge).to_have_attribute("data-i18n", f"people.status.{people[address].lower()}")
    await tab.shot("event-attendees")


# ---- zone, language, working hours, address; sharing ---------------------------------------------------


async def test_the_zone_language_hours_and_address_are_saved_read_back_and_change_the_page(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    scripted.set_script(
        script(
            on_user(
                "评审",
                tool_calls=[call("prepare_or_create_schedule", title="评审", date="D+1", time="15:00")],
            )
        )
    )
    assert (await stack.chat(user, "明天下午三点评审")).json()["outcome"] == "created"
    [event] = await read_events(stack, user)
    tab = await new_tab(browser, base_url, tabs, locale="zh-CN")
    await tab.sign_in(user)
    page = tab.page
    when = page.locator(f'#week-days .event[data-event-id="{event["id"]}"] .when')
    await expect(when).to_have_text(re.compile(r"^15:00"))

    await open_settings(page)
    await expect(page.locator("#prefs-hours .hours-row")).to_have_count(7)
    await page.fill("#prefs-tz", "Europe/Berlin")
    await page.select_option("#prefs-lang", "en")
    await page.fill("#prefs-email", f"{user}@example.com")
    await page.fill("#hours-mon-from", "08:30")
    await page.check("#hours-mon-on")
    await page.uncheck("#hours-fri-on")
    await page.check("#hours-sat-on")
    await page.fill("#hours-sat-from", "10:00")
    await page.fill("#hours-sat-until", "14:00")
    await page.uncheck("#hours-sun-on")
    await expect(page.locator("#prefs-invitations")).to_have_value("everyone")
    await page.select_option("#prefs-invitations", "known")
    await page.click("#prefs-form button[type=submit]")
    await expect(page.locator("#prefs-status")).to_have_attribute("data-i18n", "settings.saved")

    saved = await get_json(stack, user, "/v1/settings")
    assert (saved["tz"], saved["language"], saved["email"]) == ("Europe/Berlin", "en", f"{user}@example.com")
    assert saved["invitations_from"] == "known"
    hours = saved["work_hours"]
    assert hours["mon"] == ["08:30", hours["mon"][1]]
    assert hours["sat"] == ["10:00", "14:00"]
    assert hours.get("fri") is None and hours.get("sun") is None
    # The saved language is the page's at once, and the week is in the saved zone: 15:00 in
    # Shanghai is 09:00 in Berlin (summer time).
    assert await page.get_attribute("html", "lang") == "en"
    await expect(page.locator("#settings-heading")).to_have_text(catalogs["en"]["settings.heading"])
    await expect(page.locator("#chat-heading")).to_have_text(catalogs["en"]["chat.heading"])
    await expect(when).to_have_text(re.compile(r"^09:00"))
    await page.evaluate("document.getElementById('settings').scrollTop = 0")
    await tab.shot("settings", "web-settings.png")

    # A reload keeps both; the panel shows what is stored.
    await page.keyboard.press("Escape")
    await page.reload()
    await expect(page.locator("#app")).to_be_visible()
    assert await page.get_attribute("html", "lang") == "en"
    await expect(when).to_have_text(re.compile(r"^09:00"))
    await open_settings(page)
    await expect(page.locator("#prefs-tz")).to_have_value("Europe/Berlin")
    await expect(page.locator("#hours-sat-from")).to_have_value("10:00")
    await expect(page.locator("#hours-fri-on")).not_to_be_checked()
    await expect(page.locator("#prefs-invitations")).to_have_value("known")

    # Another browser, in Chinese, with none of this tab's cookies: the saved choices follow the user.
    elsewhere = await new_tab(browser, base_url, tabs, locale="zh-CN")
    await elsewhere.sign_in(user)
    await expect(elsewhere.page.locator("html")).to_have_attribute("lang", "en")
    await expect(
        elsewhere.page.locator(f'#week-days .event[data-event-id="{event["id"]}"] .when')
    ).to_have_text(re.compile(r"^09:00"))

    # A zone that is none is refused, and nothing changes.
    await page.fill("#prefs-tz", "Mars/Olympus_Mons")
    await page.click("#prefs-form button[type=submit]")
    await expect(page.locator("#prefs-status")).to_have_attribute("data-i18n", "settings.error")
    assert (await get_json(stack, user, "/v1/settings"))["tz"] == "Europe/Berlin"
    tab.allowed = ("status of 422",)


async def test_free_busy_is_shared_with_a_user_seen_by_them_and_stopped(
    browser: Browser, base_url: str, stack: Stack, user: str, tabs: list[Tab]
) -> None:
    friend = f"{user}-friend"
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    await open_settings(page)
    await page.fill("#sharing-with", friend)
    await page.press("#sharing-with", "Enter")
    shared = page.locator(f'#sharing-list li[data-user="{friend}"]')
    await expect(shared).to_have_count(1)
    assert friend in shared_with(await get_json(stack, user, "/v1/sharing"))
    assert user in shared_with_me(await get_json(stack, friend, "/v1/sharing"))

    # The friend sees who shares with them.
    other = await new_tab(browser, base_url, tabs)
    await other.sign_in(friend)
    await open_settings(other.page)
    await expect(other.page.locator(f'#sharing-from li[data-user="{user}"]')).to_have_count(1)
    await other.shot("settings-shared-with-me")

    await shared.locator("button").click()
    await expect(page.locator("#sharing-list li")).to_have_count(0)
    assert shared_with(await get_json(stack, user, "/v1/sharing")) == []
    assert shared_with_me(await get_json(stack, friend, "/v1/sharing")) == []
