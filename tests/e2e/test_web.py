"""The page at `/` (issue 14) in headless Chromium against the real running system.

Every service runs as in production (the in-process stack on real NATS and PostgreSQL, the
scripted model behind an OpenAI-compatible HTTP port); the gateway, with the page, listens on a
real TCP port under uvicorn, and Debian's Chromium drives it through Playwright. Assertions are
facts: DOM state the page exposes (`data-*`), the scripted model's request log, and events read
back over HTTP; never wording. Each test leaves a screenshot in `.test-output/web/`; with
`CALAGENT_DOCS_SCREENSHOTS=1` the three the README shows are rewritten under `docs/`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright, expect

from calagent.cli.main import make_login_link
from calagent.cli.stack import Stack, start_stack
from calagent.devtools.testing.servers import Servers
from calagent.gateway.app import create_app as create_gateway
from calagent.gateway.auth import issue_login_token
from calagent.scriptedmodel import ScriptedModelServer

from .conftest import call, on_user, read_events, script

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / ".test-output" / "web"
DOCS = ROOT / "docs"
# Debian's chromium package (the Makefile installs it); nothing here downloads a browser.
CHROMIUM = os.environ.get("CALAGENT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
AXE = Path(__file__).parent / "assets" / "axe-core" / "axe.min.js"  # vendored from npm, MPL-2.0
# Serious and critical axe-core violations of the page as it stands, by rule and element.
AXE_RUN = """async () => {
  // label-content-name-mismatch (WCAG 2.5.3) is experimental in axe-core, off unless asked for.
  const result = await axe.run(document, {
    resultTypes: ["violations"],
    rules: { "label-content-name-mismatch": { enabled: true } },
  });
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .flatMap((v) => v.nodes.map((n) => `${v.id}: ${n.target.join(" ")}`));
}"""
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
WEEK = ("2026-09-21T00:00:00+08:00", "2026-09-28T00:00:00+08:00")  # the week of the frozen "now"


# ---- the system, on a real port ------------------------------------------------------------------


@pytest.fixture(scope="module")
async def stack(servers: Servers, database_url: str, scripted: ScriptedModelServer) -> AsyncIterator[Stack]:
    # Development sign-in on purpose: the page offers minting a token for a typed name.
    system = await start_stack(
        nats_url=servers.nats_url,
        nats_url_for=servers.nats_url_for,
        database_url=database_url,
        model_base_url=scripted.base_url,
        settings_overrides={"CALAGENT_WEB_DEV_SIGNIN": True},
    )
    yield system
    await system.stop()


def _listening_socket() -> socket.socket:
    # IPPROTO_TCP spelled out so asyncio sets TCP_NODELAY (see the gateway's __main__).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@contextlib.asynccontextmanager
async def served_gateway(stack: Stack, name: str) -> AsyncIterator[str]:
    """The production gateway app (its own bus, from its lifespan) under uvicorn on a free port."""
    app = create_gateway(stack.settings, stack.clock)
    config = uvicorn.Config(app, log_config=None, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    sock = _listening_socket()
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)
    thread.start()
    for _ in range(1000):
        if server.started or not thread.is_alive():
            break
        await asyncio.sleep(0.01)
    assert server.started, "the gateway did not start"
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.to_thread(thread.join, 15)
        sock.close()


@pytest.fixture(scope="module")
async def base_url(stack: Stack) -> AsyncIterator[str]:
    async with served_gateway(stack, "web-gateway") as url:
        yield url


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(
            f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)"
        )
    async with async_playwright() as playwright:
        # Playwright adds --headless and a fresh temporary --user-data-dir of its own.
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        await launched.close()


@pytest.fixture(scope="module")
def catalogs(base_url: str) -> dict[str, dict[str, str]]:
    """Every string of the page in both languages, as the page itself gets them."""
    found: dict[str, dict[str, str]] = httpx.get(f"{base_url}/web/i18n.json").json()
    return found


# WCAG 2 contrast of every visible piece of text against the first opaque background behind it.
LOW_CONTRAST = """() => {
  const parse = (c) => {
    const m = c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
  };
  const channel = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = (c) => 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b);
  const behind = (e) => {
    for (; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a >= 0.99) return c;
    }
    return { r: 255, g: 255, b: 255, a: 1 };
  };
  const found = [];
  for (const e of document.querySelectorAll("body *")) {
    const text = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!text || !e.checkVisibility() || e.closest("button:disabled, [aria-hidden=true]")) continue;
    const style = getComputedStyle(e);
    const [hi, lo] = [lum(parse(style.color)), lum(behind(e))].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const size = parseFloat(style.fontSize);
    const large = size >= 24 || (Number(style.fontWeight) >= 700 && size >= 18.66);
    if (ratio < (large ? 3 : 4.5)) found.push(`${e.tagName}.${e.className} ${ratio.toFixed(2)}`);
  }
  return found;
}"""

# Any refusal by the Content-Security-Policy reaches the console, whatever Chromium's wording.
REPORT_CSP = """document.addEventListener("securitypolicyviolation",
  (e) => console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`));"""


class Tab:
    """One browser tab on the page, with what it logged."""

    def __init__(self, page: Page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.errors: list[str] = []
        self.console: list[str] = []
        # Console lines a test expects (a refused token is a 401 Chromium reports).
        self.allowed: tuple[str, ...] = ()
        # Every state the test looked at (each screenshot) is checked with axe-core.
        self.inaccessible: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("console", self._on_console)

    def _on_console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.console.append(message.text)

    async def open(self) -> None:
        await self.page.goto(self.base_url + "/")
        await expect(self.page.locator("body[data-ready=true]")).to_have_count(1)

    async def sign_in(self, user: str) -> None:
        """Development mode: a token minted for the user name, as a person would do it."""
        await self.open()
        await self.page.fill("#dev-user", user)
        await self.page.press("#dev-user", "Enter")
        await expect(self.page.locator("#app")).to_be_visible()
        await expect(self.page.locator("#week-days .day")).to_have_count(7)
        # The conversation so far is shown before anything is sent: an answer is counted after it.
        await expect(self.page.locator("#messages")).to_have_attribute("data-loaded", "true")

    async def send(self, text: str) -> dict[str, str]:
        """Type a message and press Enter; the finished assistant message's facts."""
        before = await self.page.locator(".message.assistant").count()
        await self.page.fill("#composer-input", text)
        await self.page.press("#composer-input", "Enter")
        return await self.answer(before)

    async def answer(self, before: int) -> dict[str, str]:
        done = self.page.locator(".message.assistant").nth(before)
        await expect(done).to_have_attribute("data-outcome", re.compile(r".+"))
        facts = await done.evaluate(
            "e => ({turn_id: e.dataset.turnId, outcome: e.dataset.outcome, model_calls: e.dataset.modelCalls})"
        )
        assert isinstance(facts, dict)
        return facts

    async def axe(self) -> list[str]:
        """axe-core's serious and critical violations now; injected through the DevTools protocol,
        which the page's Content-Security-Policy does not govern."""
        if not await self.page.evaluate("typeof axe !== 'undefined'"):
            await self.page.evaluate(AXE.read_text(encoding="utf-8") + "\n;undefined")
        found: list[str] = await self.page.evaluate(AXE_RUN)
        self.inaccessible.extend(found)
        return found

    async def shot(self, name: str, docs_name: str | None = None) -> Path:
        await self.axe()
        OUTPUT.mkdir(parents=True, exist_ok=True)
        path = OUTPUT / f"{name}.png"
        await self.page.screenshot(path=str(path), full_page=True)
        if docs_name and os.environ.get("CALAGENT_DOCS_SCREENSHOTS") == "1":
            shutil.copyfile(path, DOCS / docs_name)
        return path

    async def low_contrast(self) -> list[str]:
        found: list[str] = await self.page.evaluate(LOW_CONTRAST)
        return found

    def check_clean(self, allow: tuple[str, ...] = ()) -> None:
        """No uncaught error, nothing the Content-Security-Policy refused, no serious or critical
        accessibility violation in any state looked at."""
        assert self.errors == []
        assert self.inaccessible == []
        refused = [
            m for m in self.console if any(w in m for w in ("Content Security Policy", "Refused to", "CSP"))
        ]
        assert refused == []
        unexpected = [m for m in self.console if not any(a in m for a in allow)]
        assert unexpected == []


@pytest.fixture
async def tabs(browser: Browser, base_url: str) -> AsyncIterator[list[Tab]]:
    opened: list[Tab] = []
    yield opened
    for tab in opened:
        await tab.page.context.close()
    for tab in opened:
        tab.check_clean(tab.allowed)


async def new_tab(
    browser: Browser,
    base_url: str,
    opened: list[Tab],
    *,
    locale: str = "zh-CN",
    viewport: dict[str, int] = DESKTOP,
) -> Tab:
    # Reduced motion: axe measures contrast on the settled page, never half-way through a message's
    # fade-in (where any text is "low contrast").
    context = await browser.new_context(locale=locale, viewport=viewport, reduced_motion="reduce")  # type: ignore[arg-type]
    await context.add_init_script(REPORT_CSP)
    tab = Tab(await context.new_page(), base_url)
    opened.append(tab)
    return tab


def create(title: str, date: str, time: str | None = None, **more: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"title": title, "date": date, **more}
    if time is not None:
        arguments["time"] = time
    return call("prepare_or_create_schedule", **arguments)


async def week_events(stack: Stack, user: str) -> list[dict[str, Any]]:
    return await read_events(stack, user, *WEEK)


# ---- sign-in -------------------------------------------------------------------------------------


async def test_sign_in_with_a_pasted_token_and_a_refused_token_leads_back_to_sign_in(
    browser: Browser, base_url: str, stack: Stack, user: str, tabs: list[Tab]
) -> None:
    tab = await new_tab(browser, base_url, tabs)
    page = tab.page
    await tab.open()
    # Every field has a label.
    unlabelled = await page.evaluate(
        "[...document.querySelectorAll('input, textarea')].filter(e => !e.labels.length && !e.ariaLabel).length"
    )
    assert unlabelled == 0
    token = stack.token(user, "Europe/Berlin")
    await page.fill("#token-input", token)
    await page.click("#token-form button[type=submit]")
    await expect(page.locator("#app")).to_be_visible()
    await expect(page.locator("#signin")).to_be_hidden()
    await expect(page.locator("#who")).to_contain_text(user)
    await expect(page.locator("#who")).to_contain_text("Europe/Berlin")
    assert await page.evaluate("sessionStorage.getItem('calagent.token')") == token
    await tab.shot("sign-in-done")

    # A token the gateway refuses (here: signed with another secret) ends the session.
    foreign = token.rsplit(".", 1)[0] + ".c2lnbmF0dXJl"
    await page.evaluate(f"sessionStorage.setItem('calagent.token', {foreign!r})")
    await page.reload()
    await expect(page.locator("#signin")).to_be_visible()
    await expect(page.locator("#signin-message")).to_be_visible()
    assert await page.evaluate("sessionStorage.getItem('calagent.token')") is None
    assert await tab.low_contrast() == []
    await tab.shot("sign-in-refused")
    tab.allowed = ("status of 401",)

    # Development mode: a token minted for a user name.
    await tab.sign_in(f"{user}-dev")
    await expect(page.locator("#who")).to_contain_text(f"{user}-dev")


async def test_a_one_time_sign_in_link_signs_in_once_and_only_within_ten_minutes(
    browser: Browser, base_url: str, stack: Stack, user: str, tabs: list[Tab]
) -> None:
    link = make_login_link(stack.settings, user, "Europe/Berlin", base_url)
    assert link.startswith(f"{base_url}/#login=")
    tab = await new_tab(browser, base_url, tabs)
    page = tab.page
    await page.goto(link)
    await expect(page.locator("#app")).to_be_visible()
    await expect(page.locator("#who")).to_contain_text(user)
    await expect(page.locator("#who")).to_contain_text("Europe/Berlin")
    assert await page.evaluate("window.location.hash") == ""  # the credential left the address
    token = await page.evaluate("sessionStorage.getItem('calagent.token')")
    session = await stack.client.get("/web/session", headers={"Authorization": f"Bearer {token}"})
    assert session.json()["user_id"] == user

    # Once only: the same link in another tab (or on another gateway) is refused.
    again = await new_tab(browser, base_url, tabs)
    await again.page.goto(link)
    await expect(again.page.locator("#signin-message")).to_be_visible()
    await expect(again.page.locator("#app")).to_be_hidden()
    again.allowed = ("status of 401",)
    await again.shot("sign-in-link-used")

    # Ten minutes of the system's clock; and the link's credential is no bearer token.
    secret = stack.settings.require_auth_secret()
    stale = issue_login_token(user, secret, stack.clock.now() - timedelta(minutes=10, seconds=1))
    refused = await stack.client.post("/web/login", json={"token": stale})
    assert refused.status_code == 401
    fresh = issue_login_token(user, secret, stack.clock.now() - timedelta(minutes=9))
    assert (
        await stack.client.get("/web/session", headers={"Authorization": f"Bearer {fresh}"})
    ).status_code == 401
    assert (await stack.client.post("/web/login", json={"token": token})).status_code == 401
    assert (await stack.client.post("/web/login", json={"token": fresh})).status_code == 200


# ---- chat, streaming, the week ------------------------------------------------------------------


async def test_an_event_created_by_chat_appears_in_the_week(
    browser: Browser, base_url: str, stack: Stack, scripted: ScriptedModelServer, user: str, tabs: list[Tab]
) -> None:
    scripted.set_script(script(on_user("和张三开会", tool_calls=[create("和张三开会", "D+1", "15:00")])))
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    answer = await tab.send("明天下午三点和张三开会")
    assert answer["outcome"] == "created"
    bubble = page.locator(".message.assistant").last
    # The tool call arrived as a stream event and stays listed under the reply.
    await expect(bubble.locator("[data-tool=prepare_or_create_schedule]")).to_have_count(1)

    [event] = await week_events(stack, user)
    chip = page.locator(f'#week-days .day[data-date="2026-09-25"] .event[data-event-id="{event["id"]}"]')
    await expect(chip).to_be_visible()
    await expect(chip).to_contain_text(event["title"])
    await expect(page.locator("#week-days .event")).to_have_count(1)
    # Today (the frozen "now", a Thursday) is marked.
    await expect(page.locator('#week-days .day[aria-current="date"]')).to_have_attribute(
        "data-date", "2026-09-24"
    )
    await tab.shot("chat-created-week")


async def test_a_series_and_a_multi_day_event_fill_every_day_they_cover(
    browser: Browser, base_url: str, stack: Stack, scripted: ScriptedModelServer, user: str, tabs: list[Tab]
) -> None:
    scripted.set_script(
        script(
            on_user("站会", tool_calls=[create("站会", "D", "18:00", recurrence="FREQ=DAILY;COUNT=2")]),
            on_user("出差", tool_calls=[create("出差", "D+2", end_date="D+3", all_day=True)]),
        )
    )
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    held = await tab.send("今明两天晚上六点站会")
    assert held["outcome"] == "held"  # a repeating create is shown as a plan first
    await page.locator("#card button.confirm").click()
    assert (await tab.answer(1))["outcome"] == "created"
    assert (await tab.send("周末出差两天"))["outcome"] == "created"

    read_back = await week_events(stack, user)
    trip = [e["id"] for e in read_back if e["all_day"]]
    occurrences = [e["id"] for e in read_back if not e["all_day"]]
    assert len(trip) == 1 and len(occurrences) == 2
    for day in ("2026-09-24", "2026-09-25"):
        await expect(page.locator(f'.day[data-date="{day}"] .event:not(.multi-day)')).to_have_count(1)
    for day in ("2026-09-26", "2026-09-27"):
        await expect(page.locator(f'.day[data-date="{day}"] .event.multi-day')).to_have_count(1)
    shown = await page.eval_on_selector_all("#week-days .event", "es => es.map(e => e.dataset.eventId)")
    # Each occurrence of the series, and the trip once on every day it covers.
    assert sorted(shown) == sorted(occurrences + trip * 2)
    await tab.shot("week-series-multi-day", "web-week.png")


# ---- the pending command as a card --------------------------------------------------------------


async def test_tapping_a_weekend_candidate_answers_the_stub_with_zero_model_calls(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    scripted.set_script(script(on_user("修汽车轮毂", tool_calls=[create("修汽车轮毂", "WE", "14:00")])))
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    assert (await tab.send("这个周末下午两点去修汽车轮毂"))["outcome"] == "needs_date"
    card = page.locator("#card")
    await expect(card).to_have_attribute("data-status", "needs_date")
    candidates = card.locator("button[data-candidate]")
    assert await candidates.evaluate_all("bs => bs.map(b => b.dataset.candidate)") == [
        "2026-09-26",
        "2026-09-27",
    ]
    await expect(card.locator(".countdown")).to_have_text(re.compile(r"\d\d:\d\d"))
    await tab.shot("card-needs-date", "web-chat-card.png")

    sunday = card.locator('button[data-candidate="2026-09-27"]')
    # It sends what a person would type in this language: the weekday.
    assert await sunday.get_attribute("data-sends") == catalogs["zh"]["reply.weekday.7"]
    asked = len(scripted.requests)
    before = await page.locator(".message.assistant").count()
    await sunday.click()
    answer = await tab.answer(before)
    assert (answer["outcome"], answer["model_calls"]) == ("created", "0")
    assert len(scripted.requests) == asked
    await expect(page.locator(".message.user").last.locator(".text")).to_have_text(
        catalogs["zh"]["reply.weekday.7"]
    )
    await expect(card).to_be_hidden()
    [event] = await week_events(stack, user)
    assert event["start"] == "2026-09-27T14:00:00+08:00"
    await expect(
        page.locator(f'.day[data-date="2026-09-27"] .event[data-event-id="{event["id"]}"]')
    ).to_be_visible()
    await tab.shot("card-answered")


async def test_a_held_move_is_confirmed_with_the_button(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    scripted.set_script(script(on_user("和张三开会", tool_calls=[create("和张三开会", "D+1", "15:00")])))
    assert (await stack.chat(user, "明天下午三点和张三开会")).json()["outcome"] == "created"
    [meeting] = await week_events(stack, user)
    scripted.set_script(
        script(
            on_user(
                "改到后天",
                tool_calls=[call("update_schedule", event_id=meeting["id"], date="D+2", time="16:00")],
            )
        )
    )
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    await expect(
        page.locator(f'.day[data-date="2026-09-25"] .event[data-event-id="{meeting["id"]}"]')
    ).to_be_visible()
    assert (await tab.send("把明天和张三的会改到后天下午四点"))["outcome"] == "held"
    card = page.locator("#card")
    await expect(card).to_have_attribute("data-status", "held")
    await expect(card.locator(".why")).to_have_text(catalogs["zh"]["card.why.change_confirmation"])
    confirm = card.locator("button.confirm")
    assert await confirm.get_attribute("data-sends") == catalogs["zh"]["reply.confirm"]
    assert await card.locator("button.cancel").get_attribute("data-command") == "cancel_schedule_command"
    assert await tab.low_contrast() == []
    await tab.shot("card-held-move")
    # Nothing moved yet.
    assert [e["start"] for e in await week_events(stack, user)] == ["2026-09-25T15:00:00+08:00"]

    asked = len(scripted.requests)
    before = await page.locator(".message.assistant").count()
    await confirm.click()
    answer = await tab.answer(before)
    assert (answer["outcome"], answer["model_calls"]) == ("updated", "0")
    assert len(scripted.requests) == asked
    assert [(e["id"], e["start"]) for e in await week_events(stack, user)] == [
        (meeting["id"], "2026-09-26T16:00:00+08:00")
    ]
    await expect(
        page.locator(f'.day[data-date="2026-09-26"] .event[data-event-id="{meeting["id"]}"]')
    ).to_be_visible()
    await expect(page.locator('.day[data-date="2026-09-25"] .event')).to_have_count(0)
    await expect(card).to_be_hidden()


# ---- where the time went -------------------------------------------------------------------------


async def test_an_assistant_message_unfolds_its_turns_timeline(
    browser: Browser, base_url: str, stack: Stack, scripted: ScriptedModelServer, user: str, tabs: list[Tab]
) -> None:
    scripted.set_script(
        script(
            on_user("修汽车轮毂", tool_calls=[create("修汽车轮毂", "WE")]),
            on_user("开会", tool_calls=[create("开会", "D+1", "10:00")]),
        )
    )
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    await tab.send("明天上午十点开会")
    answer = await tab.send("这个周末去修汽车轮毂")
    bubble = page.locator(f'.message.assistant[data-turn-id="{answer["turn_id"]}"]')
    toggle = bubble.locator("button.timeline-toggle")
    await expect(toggle).to_be_hidden()  # folded with the other technical details
    await bubble.locator("details.tech summary").click()
    await expect(toggle).to_have_attribute("aria-expanded", "false")
    await toggle.click()
    await expect(toggle).to_have_attribute("aria-expanded", "true")
    rows = bubble.locator("table.waterfall tr[data-segment]")
    await expect(rows.first).to_be_visible()
    shown = await rows.evaluate_all("rs => rs.map(r => r.dataset.segment)")
    timeline = (
        await stack.client.get(f"/v1/turns/{answer['turn_id']}/timeline", headers=stack.headers(user))
    ).json()
    # The same segments `calagent timeline` prints, the gateway's receive segment among them.
    assert set(shown) <= {s["name"] for s in timeline["segments"]}
    assert {"model.request", "tool.prepare_or_create_schedule"} <= set(shown)
    assert await tab.low_contrast() == []
    await tab.shot("timeline", "web-timeline.png")
    await toggle.click()
    await expect(bubble.locator("table.waterfall")).to_be_hidden()


# ---- language ------------------------------------------------------------------------------------


async def test_the_page_follows_the_browser_language_and_switches(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    english = await new_tab(browser, base_url, tabs, locale="en-US")
    await english.open()
    assert await english.page.get_attribute("html", "lang") == "en"
    await expect(english.page.locator("#signin-heading")).to_have_text(catalogs["en"]["signin.heading"])

    scripted.set_script(script(on_user("meeting", tool_calls=[create("Meeting", "D-1", "15:00")])))
    tab = await new_tab(browser, base_url, tabs, locale="zh-CN")
    await tab.sign_in(user)
    page = tab.page
    assert await page.get_attribute("html", "lang") == "zh-CN"
    await expect(page.locator("#chat-heading")).to_have_text(catalogs["zh"]["chat.heading"])
    await page.click("#lang-switch")
    assert await page.get_attribute("html", "lang") == "en"
    await expect(page.locator("#chat-heading")).to_have_text(catalogs["en"]["chat.heading"])
    await expect(page.locator("#week-heading")).to_have_text(catalogs["en"]["week.heading"])
    assert (
        await page.get_attribute("#composer-input", "placeholder") == catalogs["en"]["chat.input_placeholder"]
    )
    assert (
        await page.locator("#week-days .day h3 .weekday").first.text_content() == catalogs["en"]["weekday.1"]
    )

    # In English the buttons send the English words, through the same zero-model path.
    assert (await tab.send("had a meeting yesterday at 3pm"))["outcome"] == "held"
    confirm = page.locator("#card button.confirm")
    await expect(confirm).to_have_text(catalogs["en"]["card.confirm"])
    assert await confirm.get_attribute("data-sends") == catalogs["en"]["reply.confirm"]
    before = await page.locator(".message.assistant").count()
    await confirm.click()
    answer = await tab.answer(before)
    assert (answer["outcome"], answer["model_calls"]) == ("created", "0")
    [event] = await week_events(stack, user)
    assert event["start"] == "2026-09-23T15:00:00+08:00"
    await expect(
        page.locator(f'.day[data-date="2026-09-23"] .event[data-event-id="{event["id"]}"]')
    ).to_be_visible()

    # The choice outlives a reload (the token too: same tab).
    await page.reload()
    await expect(page.locator("#app")).to_be_visible()
    assert await page.get_attribute("html", "lang") == "en"
    assert await tab.low_contrast() == []
    await tab.shot("language-en")


# ---- a phone, the keyboard alone, the feed --------------------------------------------------------


# How many rows the header's visible parts take (their vertical centres, to a few pixels).
HEADER_ROWS = """() => {
  const parts = [...document.querySelectorAll(".topbar .brand, .topbar button")].filter((e) => e.checkVisibility());
  const rows = new Set(parts.map((e) => { const r = e.getBoundingClientRect(); return Math.round((r.top + r.bottom) / 16); }));
  return rows.size;
}"""


async def test_a_phone_sized_screen_with_the_keyboard_alone(
    browser: Browser, base_url: str, stack: Stack, scripted: ScriptedModelServer, user: str, tabs: list[Tab]
) -> None:
    scripted.set_script(script(on_user("修汽车轮毂", tool_calls=[create("修汽车轮毂", "WE", "09:00")])))
    tab = await new_tab(browser, base_url, tabs, viewport=PHONE)
    await tab.open()
    page = tab.page
    # Focus starts in the user-name field; everything below is keys only.
    await page.keyboard.type(user)
    await page.keyboard.press("Enter")
    await expect(page.locator("#app")).to_be_visible()
    await expect(page.locator("#composer-input")).to_be_focused()
    # The header is one row: sign-out and the language switch sit beside the name, not below it.
    assert await page.evaluate(HEADER_ROWS) == 1
    await page.keyboard.type("这个周末上午九点去修汽车轮毂")
    await page.keyboard.press("Enter")
    await expect(page.locator("#card")).to_have_attribute("data-status", "needs_date")
    await expect(page.locator("#composer-input")).to_be_focused()
    # Back from the composer into the card: the candidates come first.
    for _ in range(6):
        await page.keyboard.press("Shift+Tab")
        if await page.evaluate("document.activeElement.dataset.candidate || null"):
            break
    picked = await page.evaluate("document.activeElement.dataset.candidate")
    assert picked in ("2026-09-26", "2026-09-27")
    before = await page.locator(".message.assistant").count()
    await page.keyboard.press("Enter")
    assert (await tab.answer(before))["outcome"] == "created"
    [event] = await week_events(stack, user)
    assert event["start"] == f"{picked}T09:00:00+08:00"
    # Nothing wider than the screen, and the conversation is part of the page, not a box that
    # scrolls inside it.
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert await page.evaluate("getComputedStyle(document.querySelector('.log')).overflowY") == "visible"
    await tab.shot("phone")


async def test_the_private_feed_address_is_created_shown_and_copied(
    browser: Browser, base_url: str, stack: Stack, user: str, tabs: list[Tab]
) -> None:
    tab = await new_tab(browser, base_url, tabs)
    await tab.page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
    await tab.sign_in(user)
    page = tab.page
    # The feed lives in the settings panel, opened from the header.
    await page.click("#settings-open")
    await expect(page.locator("#settings")).to_be_visible()
    await page.click("#feed-create")
    url_field = page.locator("#feed-url")
    await expect(url_field).to_have_value(re.compile(r"/feeds/[A-Za-z0-9_-]{16,128}\.ics$"))
    first = await url_field.input_value()
    assert first.startswith(base_url + "/feeds/")
    async with httpx.AsyncClient() as client:
        feed = await client.get(first)
        assert feed.status_code == 200
        assert feed.headers["content-type"].startswith("text/calendar")
        await page.click("#feed-copy")
        await expect(page.locator("#feed-status")).not_to_be_empty()
        assert await page.evaluate("navigator.clipboard.readText()") == first
        # Again: a new address, and the old one is gone.
        await page.click("#feed-create")
        await expect(url_field).not_to_have_value(first)
        assert (await client.get(first)).status_code == 404
    await tab.shot("feed")


# ---- the page as people live with it (contract §18) ------------------------------------------------


async def test_a_reload_keeps_the_conversation_and_the_pending_card_with_its_explanation(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    tabs: list[Tab],
    catalogs: dict[str, dict[str, str]],
) -> None:
    scripted.set_script(script(on_user("和张三开会", tool_calls=[create("和张三开会", "D+1", "15:00")])))
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    assert (await tab.send("明天下午三点和张三开会"))["outcome"] == "created"
    [meeting] = await week_events(stack, user)
    scripted.set_script(
        script(on_user("改到后天", tool_calls=[call("update_schedule", event_id=meeting["id"], date="D+2")]))
    )
    held = await tab.send("把它改到后天")
    assert held["outcome"] == "held"
    before = await page.eval_on_selector_all(
        "#messages .message",
        "ms => ms.map(m => [m.classList.contains('user'), m.querySelector('.text').textContent])",
    )
    assert len(before) == 4

    await page.reload()
    await expect(page.locator("#app")).to_be_visible()
    await expect(page.locator(".message[data-restored=true]")).to_have_count(4)
    after = await page.eval_on_selector_all(
        "#messages .message",
        "ms => ms.map(m => [m.classList.contains('user'), m.querySelector('.text').textContent])",
    )
    assert after == before
    restored = page.locator(f'.message.assistant[data-turn-id="{held["turn_id"]}"]')
    await expect(restored).to_have_attribute("data-outcome", "held")
    card = page.locator("#card")
    await expect(card).to_have_attribute("data-status", "held")
    await expect(card.locator(".why")).to_have_text(catalogs["zh"]["card.why.change_confirmation"])
    await expect(card.locator(".change")).to_be_visible()
    await tab.shot("reloaded")

    # The offer still stands after the reload: the button confirms it without the model.
    asked = len(scripted.requests)
    count = await page.locator(".message.assistant").count()
    await card.locator("button.confirm").click()
    answer = await tab.answer(count)
    assert (answer["outcome"], answer["model_calls"]) == ("updated", "0")
    assert len(scripted.requests) == asked
    assert [e["start"] for e in await week_events(stack, user)] == ["2026-09-26T15:00:00+08:00"]


async def test_replies_keep_technical_details_folded_and_an_english_users_calendars_are_english(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    tabs: list[Tab],
) -> None:
    scripted.set_script(script(on_user("lunch", tool_calls=[create("Lunch with Ana", "D+1", "12:00")])))
    tab = await new_tab(browser, base_url, tabs, locale="en-US")
    await tab.sign_in(user)
    page = tab.page
    answer = await tab.send("lunch with Ana tomorrow at noon")
    assert answer["outcome"] == "created"
    bubble = page.locator(".message.assistant").last
    tool = bubble.locator("[data-tool=prepare_or_create_schedule]")
    meta = bubble.locator(".meta")
    await expect(tool).to_have_count(1)
    await expect(tool).to_be_hidden()
    await expect(meta).to_be_hidden()
    # Times are in the user's own zone, so the reply names none.
    reply = await bubble.locator(".text").text_content()
    assert reply is not None and "Asia/Shanghai" not in reply
    await bubble.locator("details.tech summary").click()
    await expect(tool).to_be_visible()
    await expect(meta).to_be_visible()

    [event] = await week_events(stack, user)
    assert event["calendar"] == "Work"
    chip = page.locator(f'.event[data-event-id="{event["id"]}"]')
    await expect(chip.locator(".calendar")).to_contain_text("Work")
    await tab.shot("english-reply")


async def test_every_card_has_a_cancel_that_calls_no_model(
    browser: Browser, base_url: str, stack: Stack, scripted: ScriptedModelServer, user: str, tabs: list[Tab]
) -> None:
    scripted.set_script(
        script(
            on_user("修汽车轮毂", tool_calls=[create("修汽车轮毂", "WE", "14:00")]),
            on_user(
                "站会",
                tool_calls=[create("站会", "D+1", "09:00", recurrence="FREQ=WEEKLY;BYDAY=MO,WE;COUNT=4")],
            ),
        )
    )
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    card = page.locator("#card")
    for message, status in (
        ("这个周末下午两点去修汽车轮毂", "needs_date"),
        ("以后每周一三早上九点站会", "held"),
    ):
        await tab.send(message)
        await expect(card).to_have_attribute("data-status", status)
        if status == "held":
            # A series is shown as one: its rule and the next times, not a one-off date.
            await expect(card.locator(".known dd")).to_have_count(3)
            await expect(card.locator(".next-list li")).to_have_count(3)
        await tab.shot(f"card-{status}")
        asked = len(scripted.requests)
        count = await page.locator(".message.assistant").count()
        await card.locator("button.cancel").click()
        answer = await tab.answer(count)
        assert (answer["outcome"], answer["model_calls"]) == ("cancelled", "0")
        assert len(scripted.requests) == asked
        await expect(card).to_be_hidden()
        active = await stack.client.get("/v1/commands/active", headers=stack.headers(user))
        assert active.json() is None
    assert await read_events(stack, user) == []


async def test_an_events_details_move_and_delete_it_through_a_held_card(
    browser: Browser,
    base_url: str,
    stack: Stack,
    scripted: ScriptedModelServer,
    user: str,
    tabs: list[Tab],
) -> None:
    scripted.set_script(
        script(
            on_user("和张三开会", tool_calls=[create("和张三开会", "D+1", "15:00")]),
            on_user("站会", tool_calls=[create("站会", "D", "09:00", recurrence="FREQ=DAILY;COUNT=3")]),
        )
    )
    assert (await stack.chat(user, "明天下午三点和张三开会")).json()["outcome"] == "created"
    assert (await stack.chat(user, "今天起每天早上九点站会，三次")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "created"
    events = await week_events(stack, user)
    [meeting] = [e for e in events if e["title"] == "和张三开会"]
    standups = sorted((e for e in events if e["title"] == "站会"), key=lambda e: e["start"])
    assert len(standups) == 3
    asked = len(scripted.requests)

    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    details = page.locator("#event-details")
    card = page.locator("#card")

    # Move: the details, a new time, a held card, the user's word; only that event moves.
    await page.locator(f'#week-days button.open[data-event-id="{meeting["id"]}"]').click()
    await expect(details).to_be_visible()
    await expect(details).to_have_attribute("data-event-id", meeting["id"])
    await expect(details.locator('[data-fact="when"]')).to_contain_text("15:00")
    await page.click("#event-move")
    await page.fill("#move-date", "2026-09-26")
    await page.fill("#move-time", "16:30")
    count = await page.locator(".message.assistant").count()
    await page.click("#move-form button[type=submit]")
    assert (await tab.answer(count))["outcome"] == "held"
    await expect(card).to_have_attribute("data-status", "held")
    assert [e["start"] for e in await week_events(stack, user) if e["id"] == meeting["id"]] == [
        meeting["start"]
    ]
    count = await page.locator(".message.assistant").count()
    await card.locator("button.confirm").click()
    assert (await tab.answer(count))["outcome"] == "updated"
    after = {e["id"]: e["start"] for e in await week_events(stack, user)}
    assert after[meeting["id"]] == "2026-09-26T16:30:00+08:00"
    assert [after[s["id"]] for s in standups] == [s["start"] for s in standups]

    # Delete one occurrence of the series: its rule is shown, the scope asked, the rest stay.
    second = standups[1]
    await page.locator(f'#week-days button.open[data-event-id="{second["id"]}"]').click()
    await expect(details).to_have_attribute("data-event-id", second["id"])
    await expect(details.locator('[data-fact="rule"]')).not_to_be_empty()
    await expect(page.locator("#event-scope")).to_be_visible()
    await tab.shot("event-details", "web-event.png")
    count = await page.locator(".message.assistant").count()
    await page.click("#event-delete")
    assert (await tab.answer(count))["outcome"] == "held"
    count = await page.locator(".message.assistant").count()
    await card.locator("button.confirm").click()
    assert (await tab.answer(count))["outcome"] == "deleted"
    left = {e["id"] for e in await week_events(stack, user) if e["title"] == "站会"}
    assert left == {standups[0]["id"], standups[2]["id"]}
    # No model was asked for any of it.
    assert len(scripted.requests) == asked


async def test_the_month_shows_a_series_and_a_multi_day_event_on_every_day_they_cover(
    browser: Browser, base_url: str, stack: Stack, scripted: ScriptedModelServer, user: str, tabs: list[Tab]
) -> None:
    scripted.set_script(
        script(
            on_user("站会", tool_calls=[create("站会", "D", "09:00", recurrence="FREQ=DAILY;COUNT=3")]),
            on_user("出差", tool_calls=[create("出差", "D+3", end_date="D+6", all_day=True)]),
        )
    )
    assert (await stack.chat(user, "今天起每天早上九点站会，三次")).json()["outcome"] == "held"
    assert (await stack.chat(user, "确认")).json()["outcome"] == "created"
    assert (await stack.chat(user, "周日起出差四天")).json()["outcome"] == "created"
    found = await read_events(stack, user, "2026-09-01T00:00:00+08:00", "2026-10-12T00:00:00+08:00")
    [trip] = [e["id"] for e in found if e["all_day"]]
    standups = {e["start"][:10]: e["id"] for e in found if not e["all_day"]}
    assert sorted(standups) == ["2026-09-24", "2026-09-25", "2026-09-26"]

    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    await page.click("#view-month")
    await expect(page.locator("#month-view")).to_be_visible()
    await expect(page.locator("#week-view")).to_be_hidden()
    await expect(page.locator("#month-grid td.month-day")).to_have_count(42)
    for day, event_id in standups.items():
        await expect(page.locator(f'td[data-date="{day}"] .event[data-event-id="{event_id}"]')).to_have_count(
            1
        )
    # Sunday to Wednesday, across the end of the month and of a week.
    for day in ("2026-09-27", "2026-09-28", "2026-09-29", "2026-09-30"):
        await expect(page.locator(f'td[data-date="{day}"] .event[data-event-id="{trip}"]')).to_have_count(1)
    shown = await page.eval_on_selector_all("#month-grid .event", "es => es.map(e => e.dataset.eventId)")
    assert sorted(shown) == sorted([*standups.values(), *[trip] * 4])
    await expect(page.locator('td.month-day[aria-current="date"]')).to_have_attribute(
        "data-date", "2026-09-24"
    )
    await tab.shot("month", "web-month.png")
    await page.click("#month-next")
    await expect(page.locator('td[data-date="2026-10-31"]')).to_have_count(1)
    await expect(page.locator(f'td[data-date="2026-09-30"] .event[data-event-id="{trip}"]')).to_have_count(1)


# Each word of every event title on one line: a title broken mid-word reads as two words.
SPLIT_WORDS = """() => {
  const split = [];
  for (const title of document.querySelectorAll("#week-days .event .title")) {
    const node = title.firstChild;
    if (!node) continue;
    const text = node.textContent;
    for (const match of text.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      if (tops.size > 1) split.push(match[0]);
    }
  }
  return split;
}"""


async def test_the_desktop_week_keeps_titles_whole(
    browser: Browser, base_url: str, stack: Stack, scripted: ScriptedModelServer, user: str, tabs: list[Tab]
) -> None:
    scripted.set_script(
        script(
            on_user("修汽车轮毂", tool_calls=[create("修汽车轮毂", "D+1", "10:00")]),
            on_user("planning", tool_calls=[create("Quarterly planning", "D+2", "11:00")]),
        )
    )
    for message in ("明天上午十点修汽车轮毂", "planning on saturday"):
        assert (await stack.chat(user, message)).status_code == 200
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    await expect(tab.page.locator("#week-days .event")).to_have_count(2)
    assert await tab.page.evaluate(SPLIT_WORDS) == []
    await tab.shot("week-desktop")


# ---- the change log and undo (contract §15) -------------------------------------------------------


async def test_a_receipt_has_an_undo_and_recent_changes_lists_every_change_with_its_own(
    browser: Browser, base_url: str, stack: Stack, scripted: ScriptedModelServer, user: str, tabs: list[Tab]
) -> None:
    scripted.set_script(script(on_user("开会", tool_calls=[create("和张三开会", "D+1", "15:00")])))
    tab = await new_tab(browser, base_url, tabs)
    await tab.sign_in(user)
    page = tab.page
    assert (await tab.send("明天下午三点和张三开会"))["outcome"] == "created"
    [made] = await week_events(stack, user)
    await expect(page.locator("#changes-list .change")).to_have_count(1)
    await tab.shot("changes-created")

    # The receipt's Undo: no model call, the event gone, the list shows the undo and what it undid.
    scripted.clear_requests()
    before = await page.locator(".message.assistant").count()
    await page.locator(".message.assistant button.undo").first.click()
    undone = await tab.answer(before)
    assert (undone["outcome"], undone["model_calls"]) == ("deleted", "0")
    assert scripted.requests == []
    assert await week_events(stack, user) == []
    await expect(page.locator("#changes-list .change")).to_have_count(2)
    await expect(page.locator("#changes-list .change[data-undone=true]")).to_have_count(1)
    await tab.shot("changes-undone")

    # The undo, undone from the list: the event is back, the same one.
    before = await page.locator(".message.assistant").count()
    await page.locator("#changes-list .change:not([data-undone]) button.undo").first.click()
    again = await tab.answer(before)
    assert again["outcome"] == "created"
    [back] = await week_events(stack, user)
    assert (back["id"], back["uid"], back["start"]) == (made["id"], made["uid"], made["start"])
    await expect(page.locator("#changes-list .change")).to_have_count(3)
    await tab.shot("changes-redone")
