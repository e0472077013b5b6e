"""Sign-in with OpenID Connect (contract §18) against a real OpenID provider on loopback.

The provider is `oidc-provider-mock` (a real authorization server: discovery, authorize form,
token endpoint, RS256 ID tokens and its JWKS) in a thread on 127.0.0.1; the system is the
in-process stack on real NATS and PostgreSQL. Each test walks the flow over HTTP as a browser
would — start, the provider's form (choosing the `sub`), the callback — and asserts what the
gateway answers and what the commands service stored.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import jwt
import oidc_provider_mock
import pytest
import werkzeug.serving
from playwright.async_api import BrowserContext, Route, async_playwright, expect

from calagent.cli.stack import Stack, start_stack
from calagent.devtools.testing.servers import Servers
from calagent.gateway.app import create_app as create_gateway
from calagent.gateway.oidc import FLOW_COOKIE
from calagent.gateway.session import SESSION_COOKIE

from .test_web import AXE, AXE_RUN, CHROMIUM, CHROMIUM_ARGS, served_gateway

pytestmark = pytest.mark.e2e

CLIENT_ID = "calagent-test"
TOKEN_LIFE = timedelta(minutes=3)  # of the provider's ID tokens; shorter than a sign-in may take


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    server = werkzeug.serving.make_server(
        "127.0.0.1",
        0,
        oidc_provider_mock.app(require_nonce=True, access_token_max_age=TOKEN_LIFE),
        threaded=True,
    )
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(10)
    server.server_close()


@pytest.fixture(scope="module")
async def stack(servers: Servers, database_url: str, provider: str) -> AsyncIterator[Stack]:
    # The provider signs its tokens at the real time: the system's clock starts there too.
    system = await start_stack(
        nats_url=servers.nats_url,
        nats_url_for=servers.nats_url_for,
        database_url=database_url,
        model_base_url=None,
        now=datetime.now(UTC).isoformat(),
        settings_overrides={
            "CALAGENT_OIDC_ISSUER": provider,
            "CALAGENT_OIDC_CLIENT_ID": CLIENT_ID,
            "CALAGENT_OIDC_CLIENT_SECRET": "calagent-test-secret",
        },
    )
    yield system
    await system.stop()


async def send(
    stack: Stack, method: str, path: str, cookies: dict[str, str] | None = None, **kwargs: object
) -> httpx.Response:
    """One request to the gateway with exactly the cookies given (the client keeps none)."""
    headers = dict(kwargs.pop("headers", None) or {})  # type: ignore[call-overload]
    if cookies:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    try:
        return await stack.client.request(method, path, headers=headers, **kwargs)  # type: ignore[arg-type]
    finally:
        stack.client.cookies.clear()


def week(stack: Stack) -> dict[str, str]:
    now = stack.clock.now()
    return {"start": now.isoformat(), "end": (now + timedelta(days=7)).isoformat()}


def new_event(stack: Stack, title: str, time: str) -> dict[str, object]:
    day = (stack.clock.now() + timedelta(days=2)).date().isoformat()
    return {"tool": "prepare_or_create_schedule", "arguments": {"title": title, "date": day, "time": time}}


async def authorize(
    stack: Stack, sub: str, tamper: Callable[[str], str] = lambda url: url
) -> tuple[httpx.Response, str]:
    """Start, the provider's form answered as `sub`, the callback: its response and the flow cookie."""
    start = await send(stack, "GET", "/auth/oidc/start")
    assert start.status_code == 302
    flow = start.cookies[FLOW_COOKIE]
    authorize_url = tamper(start.headers["location"])
    query = dict(parse_qsl(urlsplit(authorize_url).query))
    # PKCE S256: the challenge sent is the hash of the verifier the callback will present.
    verifier = jwt.decode(flow, options={"verify_signature": False})["verifier"]
    digest = hashlib.sha256(verifier.encode()).digest()
    assert query["code_challenge_method"] == "S256"
    assert query["code_challenge"] == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert query["nonce"] and query["state"] and query["client_id"] == CLIENT_ID
    async with httpx.AsyncClient(timeout=10) as idp:
        assert (await idp.get(authorize_url)).status_code == 200  # the provider's form
        chosen = await idp.post(authorize_url, data={"sub": sub})
    assert chosen.status_code == 302
    back = urlsplit(chosen.headers["location"])
    assert back.path == "/auth/oidc/callback"
    callback = await send(stack, "GET", f"{back.path}?{back.query}", cookies={FLOW_COOKIE: flow})
    return callback, flow


def replace_param(url: str, name: str, value: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query[name] = value
    return urlunsplit(parts._replace(query=urlencode(query)))


async def test_signing_in_with_the_issuer_gives_a_cookie_that_reads_and_writes_with_csrf(
    stack: Stack,
) -> None:
    callback, _flow = await authorize(stack, "oidc-alice")
    assert callback.status_code == 303 and callback.headers["location"] == "/"
    set_cookie = next(v for v in callback.headers.get_list("set-cookie") if v.startswith(SESSION_COOKIE))
    assert "httponly" in set_cookie.lower() and "samesite=strict" in set_cookie.lower()
    cookies = {SESSION_COOKIE: callback.cookies[SESSION_COOKIE]}

    session = await send(stack, "GET", "/web/session", cookies=cookies)
    assert session.status_code == 200
    assert session.json()["user_id"] == "oidc-alice"  # the issuer's sub is the user id
    csrf = session.json()["csrf_token"]

    assert (await send(stack, "GET", "/v1/events", cookies=cookies, params=week(stack))).status_code == 200

    create = new_event(stack, "Cookie standup", "09:00")
    refused = await send(stack, "POST", "/v1/commands", cookies=cookies, json=create)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "csrf_failed"
    wrong = await send(
        stack, "POST", "/v1/commands", cookies=cookies, json=create, headers={"X-CSRF-Token": "x" * 43}
    )
    assert wrong.status_code == 403
    events = (await send(stack, "GET", "/v1/events", cookies=cookies, params=week(stack))).json()["events"]
    assert events == []  # nothing was written by the refused requests

    accepted = await send(
        stack, "POST", "/v1/commands", cookies=cookies, json=create, headers={"X-CSRF-Token": csrf}
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["outcome"] == "created", accepted.text
    # The same user through a bearer token (the CLI's `calagent token oidc-alice`), no CSRF needed.
    events = await send(stack, "GET", "/v1/events", params=week(stack), headers=stack.headers("oidc-alice"))
    assert [e["title"] for e in events.json()["events"]] == ["Cookie standup"]

    # Signing out clears the cookie; without CSRF it is refused like any change.
    assert (await send(stack, "POST", "/auth/logout", cookies=cookies)).status_code == 403
    out = await send(stack, "POST", "/auth/logout", cookies=cookies, headers={"X-CSRF-Token": csrf})
    assert out.status_code == 204
    cleared = next(v for v in out.headers.get_list("set-cookie") if v.startswith(SESSION_COOKIE))
    assert "max-age=0" in cleared.lower()


async def test_a_bearer_token_needs_no_csrf_and_wins_over_a_cookie(stack: Stack) -> None:
    callback, _flow = await authorize(stack, "oidc-bob")
    cookies = {SESSION_COOKIE: callback.cookies[SESSION_COOKIE]}
    create = new_event(stack, "Bearer review", "11:00")
    made = await send(
        stack, "POST", "/v1/commands", json=create, headers=stack.headers("bearer-carol"), cookies=cookies
    )
    assert made.status_code == 200, made.text
    carol = await send(stack, "GET", "/v1/events", params=week(stack), headers=stack.headers("bearer-carol"))
    bob = await send(stack, "GET", "/v1/events", params=week(stack), cookies=cookies)
    assert [e["title"] for e in carol.json()["events"]] == ["Bearer review"]
    assert bob.json()["events"] == []


async def test_a_wrong_state_a_wrong_nonce_or_no_flow_cookie_is_refused(stack: Stack) -> None:
    # This browser's own flow, but a callback whose state was swapped on the way.
    own = await send(stack, "GET", "/auth/oidc/start")
    async with httpx.AsyncClient(timeout=10) as idp:
        answered = await idp.post(own.headers["location"], data={"sub": "oidc-mallory"})
    returned = urlsplit(answered.headers["location"])
    forged = replace_param(f"{returned.path}?{returned.query}", "state", "forged-state")
    swapped = await send(stack, "GET", forged, cookies={FLOW_COOKIE: own.cookies[FLOW_COOKIE]})
    assert swapped.status_code == 401 and SESSION_COOKIE not in swapped.cookies

    # The state in the callback is not the one this browser started with.
    start = await send(stack, "GET", "/auth/oidc/start")
    other = await send(stack, "GET", "/auth/oidc/start")
    location = start.headers["location"]
    async with httpx.AsyncClient(timeout=10) as idp:
        chosen = await idp.post(location, data={"sub": "oidc-mallory"})
    back = urlsplit(chosen.headers["location"])
    crossed = await send(
        stack, "GET", f"{back.path}?{back.query}", cookies={FLOW_COOKIE: other.cookies[FLOW_COOKIE]}
    )
    assert crossed.status_code == 401 and SESSION_COOKIE not in crossed.cookies
    bare = await send(stack, "GET", f"{back.path}?{back.query}")
    assert bare.status_code == 401 and SESSION_COOKIE not in bare.cookies

    # The provider is asked with another nonce: its ID token does not carry this flow's.
    refused, _flow = await authorize(
        stack, "oidc-mallory", lambda url: replace_param(url, "nonce", "forged-nonce")
    )
    assert refused.status_code == 401 and SESSION_COOKIE not in refused.cookies
    assert "nonce" in refused.json()["error"]["message"]


async def test_an_id_token_past_its_exp_by_the_systems_clock_is_refused_and_a_session_expires(
    stack: Stack,
) -> None:
    callback, _flow = await authorize(stack, "oidc-dave")
    cookies = {SESSION_COOKIE: callback.cookies[SESSION_COOKIE]}
    assert (await send(stack, "GET", "/web/session", cookies=cookies)).status_code == 200
    start = stack.clock.now()
    try:
        stack.clock.advance(timedelta(days=8))
        expired = await send(stack, "GET", "/v1/events", cookies=cookies, params=week(stack))
        assert expired.status_code == 401
    finally:
        stack.clock.set(start)

    # Six minutes on by the system's clock (the sign-in itself may take ten), the provider's
    # three-minute ID token has expired.
    def later(url: str) -> str:
        stack.clock.advance(timedelta(minutes=6))
        return url

    try:
        late, _flow = await authorize(stack, "oidc-dave", later)
    finally:
        stack.clock.set(start)
    assert late.status_code == 401 and SESSION_COOKIE not in late.cookies
    assert "expired" in late.json()["error"]["message"]


async def test_the_page_offers_the_issuer_only_when_configured(stack: Stack) -> None:
    page = await send(stack, "GET", "/")
    assert 'href="/auth/oidc/start"' in page.text
    plain = stack.settings.model_copy(update={"oidc_issuer": None})
    app = create_gateway(plain, stack.clock)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        assert 'href="/auth/oidc/start"' not in (await client.get("/")).text
        assert (await client.get("/auth/oidc/start")).status_code == 404


# ---- in Chromium ---------------------------------------------------------------------------------

# Nothing but loopback: the provider's form links a style sheet from a CDN, which is refused here,
# and no name but 127.0.0.1 resolves.
LOOPBACK_ONLY = re.compile(r"^(?!https?://127\.0\.0\.1[:/]).*")


@pytest.fixture
async def page_url(stack: Stack) -> AsyncIterator[str]:
    async with served_gateway(stack, "oidc-gateway") as url:
        yield url


async def test_in_chromium_sign_in_with_the_issuer_then_a_change_then_sign_out(
    stack: Stack, page_url: str
) -> None:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
            headless=True,
        )
        try:
            context = await browser.new_context()

            async def refuse(route: Route) -> None:
                await route.abort()

            await context.route(LOOPBACK_ONLY, refuse)
            page = await context.new_page()
            await page.goto(page_url + "/")
            await expect(page.locator("body[data-ready=true]")).to_have_count(1)
            await page.evaluate(AXE.read_text(encoding="utf-8") + "\n;undefined")
            assert await page.evaluate(AXE_RUN) == []  # the sign-in with its issuer button
            await page.click("#oidc-signin")
            # The provider's own form: the subject typed is the `sub` of its ID token.
            await page.fill('input[name="sub"]', "oidc-erin")
            await page.press('input[name="sub"]', "Enter")
            await expect(page.locator("#app")).to_be_visible()
            cookies = {c["name"]: c for c in await context.cookies(page_url)}
            session = cookies[SESSION_COOKIE]
            assert session.get("httpOnly") is True and session.get("sameSite") == "Strict"
            assert await page.evaluate("document.cookie") == ""  # the page's script cannot read it
            who = await page.evaluate("fetch('/web/session').then((r) => r.json())")
            assert who["user_id"] == "oidc-erin"

            # A change from the page (a private feed address, in the settings panel) carries the CSRF
            # token and is accepted.
            await page.click("#settings-open")
            await page.click("#feed-create")
            await expect(page.locator("#feed-url")).to_have_value(re.compile(r"/feeds/[A-Za-z0-9_-]+\.ics$"))
            feed_url = await page.locator("#feed-url").input_value()
            async with httpx.AsyncClient(timeout=10) as client:
                assert (await client.get(feed_url)).status_code == 200
            await page.keyboard.press("Escape")

            await page.click("#sign-out")
            await expect(page.locator("#signin")).to_be_visible()
            for _ in range(200):  # the sign-out request is sent as the page clears itself
                if not await _has_session(context, page_url):
                    break
                await asyncio.sleep(0.05)
            assert not await _has_session(context, page_url)
            await page.reload()
            await expect(page.locator("body[data-ready=true]")).to_have_count(1)
            await expect(page.locator("#signin")).to_be_visible()
            await expect(page.locator("#app")).to_be_hidden()
        finally:
            await browser.close()


async def _has_session(context: BrowserContext, url: str) -> bool:
    return any(c["name"] == SESSION_COOKIE for c in await context.cookies(url))
