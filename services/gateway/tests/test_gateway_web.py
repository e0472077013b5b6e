"""The page's own routes (issue 14), without a bus: what is served, in which language, under which
policy, and who may mint a token. The page in a real browser is tests/e2e/test_web.py."""

from __future__ import annotations

import re
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from calagent.gateway.auth import issue_token, verify_token
from calagent.gateway.state import Gateway
from calagent.gateway.web import page_router
from calagent.gateway.web.i18n import CATALOG, LANGS, PLACEHOLDER, negotiate
from calagent.gateway.web.routes import SCRIPT_MODULES, STATIC, STATIC_FILES, TEMPLATES
from calagent.runtime.clock import FrozenClock
from calagent.runtime.settings import Settings

pytestmark = pytest.mark.unit

SECRET = "unit-test-secret-that-is-long-enough-for-hs256"
NOW = datetime.fromisoformat("2026-09-24T10:00:00+08:00")


def page_script() -> str:
    """Every module of the page's script, as one text."""
    return "\n".join((STATIC / name).read_text() for name in SCRIPT_MODULES)


def client(secret: str = SECRET, *, dev_signin: bool = False) -> TestClient:
    settings = Settings(CALAGENT_AUTH_SECRET=secret, CALAGENT_WEB_DEV_SIGNIN=dev_signin)
    clock = FrozenClock(NOW)
    app = FastAPI()
    # The page's session is the gateway's signed-in user, in their saved zone: a gateway without a
    # bus knows no saved zone, so the token's zone stands.
    app.state.gateway = Gateway(settings, clock, None)
    app.include_router(page_router(settings, clock))
    return TestClient(app)


# ---- language -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "cookie", "expected"),
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", None, "zh"),
        ("zh-TW", None, "zh"),
        ("en-US,en;q=0.9", None, "en"),
        ("fr-FR,en;q=0.5,zh;q=0.7", None, "zh"),
        ("fr-FR, de", None, "en"),
        ("zh;q=0, en;q=0.1", None, "en"),
        ("zh;q=bogus, en;q=0.1", None, "en"),
        (None, None, "en"),
        ("zh-CN", "en", "en"),
        ("en-US", "zh", "zh"),
        ("en-US", "klingon", "en"),
    ],
)
def test_the_language_follows_the_users_choice_then_the_browser(
    header: str | None, cookie: str | None, expected: str
) -> None:
    assert negotiate(header, cookie) == expected


def test_the_first_paint_is_in_the_browsers_language() -> None:
    page = client()
    zh = page.get("/", headers={"Accept-Language": "zh-CN,zh;q=0.9"})
    en = page.get("/", headers={"Accept-Language": "en-GB"})
    assert '<html lang="zh-CN" data-lang="zh">' in zh.text
    assert CATALOG["chat.heading"][0] in zh.text
    assert '<html lang="en" data-lang="en">' in en.text
    assert CATALOG["chat.heading"][1] in en.text
    assert zh.headers["content-language"] == "zh"
    page.cookies.set("calagent_lang", "zh")
    assert '<html lang="zh-CN"' in page.get("/", headers={"Accept-Language": "en-GB"}).text


def test_every_string_exists_in_both_languages_with_the_same_placeholders() -> None:
    for key, pair in CATALOG.items():
        assert len(pair) == len(LANGS), key
        assert all(text.strip() for text in pair), key
        assert set(PLACEHOLDER.findall(pair[0])) == set(PLACEHOLDER.findall(pair[1])), key


# Keys the script builds from data: `card.status.<status>`, `card.field.<slot>`, `weekday.<n>`, …
DYNAMIC_PREFIXES = (
    "card.status.",
    "card.field.",
    "card.why.",
    "weekday.",
    "reply.weekday.",
    "rule.",
    "changes.kind.",
    "changes.source.",
    "people.status.",
)
KEY_PREFIXES = (
    "app",
    "lang",
    "user",
    "signin",
    "chat",
    "card",
    "reply",
    "week",
    "weekday",
    "feed",
    "timeline",
    "error",
    "rule",
    "event",
    "view",
    "month",
    "changes",
    "settings",
    "accounts",
    "mail",
    "sharing",
    "people",
    "waiting",
    "tasks",
)


def test_every_key_the_page_uses_is_in_the_catalog_and_every_key_is_used() -> None:
    script = page_script()
    template = (TEMPLATES / "index.html").read_text()
    prefixes = "|".join(KEY_PREFIXES)
    literal = re.compile(rf"""["']((?:{prefixes})(?:\.[a-z0-9_]+)+)["']""")
    used = set(literal.findall(script)) | set(literal.findall(template))
    # The SSE event names of contract §4 look like keys and are not strings of the page.
    used = {key for key in used if not key.endswith(".")} - {"reply.delta"}
    assert used - set(CATALOG) == set()
    unused = {key for key in CATALOG if key not in used and not key.startswith(DYNAMIC_PREFIXES)}
    assert unused == set()


# ---- the page and its policy --------------------------------------------------------------------


class _Inline(HTMLParser):
    """Collects whatever a strict Content-Security-Policy would refuse."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "style":
            self.found.append("<style>")
        if tag == "script" and "src" not in names:
            self.found.append("inline <script>")
        self.in_script = tag == "script"
        self.found += [f"{tag}[{name}]" for name in names if name == "style" or name.startswith("on")]
        self.found += [
            f"{tag}[{n}={v}]" for n, v in attrs if v and v.strip().lower().startswith("javascript:")
        ]

    def handle_data(self, data: str) -> None:
        if self.in_script and data.strip():
            self.found.append("script text")

    def handle_endtag(self, tag: str) -> None:
        self.in_script = False


def test_the_page_has_a_policy_that_allows_nothing_inline_and_needs_nothing_inline() -> None:
    response = client().get("/")
    assert response.status_code == 200
    policy = response.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert "unsafe" not in policy and "data:" not in policy and "http" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    parser = _Inline()
    parser.feed(response.text)
    assert parser.found == []


def test_the_script_builds_the_page_without_html_strings_or_eval() -> None:
    script = page_script()
    for risky in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert risky not in script, risky
    # Styles change through the CSSOM only, which the policy allows; never a style attribute.
    assert 'setAttribute("style"' not in script and "cssText" not in script


def test_the_script_is_modules_of_this_origin_that_import_only_each_other() -> None:
    html = client().get("/").text
    assert re.findall(r"<script\b[^>]*>", html) == ['<script type="module" src="/web/static/app.js">']
    imported: set[str] = {"app.js"}
    for name in SCRIPT_MODULES:
        sources = re.findall(r"""\bfrom\s+["']([^"']+)["']|\bimport\s*\(""", (STATIC / name).read_text())
        assert all(re.fullmatch(r"\./[a-z0-9]+\.js", s) for s in sources), (name, sources)
        imported |= {s.removeprefix("./") for s in sources}
    # Every module is reached from app.js and served; none is left over.
    assert imported == set(SCRIPT_MODULES)
    for name in SCRIPT_MODULES:
        assert len((STATIC / name).read_text().splitlines()) <= 500, name


def test_every_field_of_the_page_has_a_label() -> None:
    html = client().get("/").text
    fields = re.findall(r"<(?:input|textarea|select)\b[^>]*\bid=\"([^\"]+)\"", html)
    assert fields
    for field in fields:
        assert f'for="{field}"' in html, field


def test_only_the_pages_own_files_are_served() -> None:
    page = client()
    for name, media_type in STATIC_FILES.items():
        response = page.get(f"/web/static/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"] == media_type
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.content == (STATIC / name).read_bytes()
    for name in ("routes.py", "..%2Froutes.py", "%2e%2e%2f__init__.py", "app.js.map", ""):
        assert page.get(f"/web/static/{name}").status_code == 404, name
    assert sorted(p.name for p in STATIC.iterdir()) == sorted(STATIC_FILES)


def test_the_catalog_is_served_whole() -> None:
    body = client().get("/web/i18n.json").json()
    assert set(body) == set(LANGS)
    assert body["zh"]["reply.confirm"] == CATALOG["reply.confirm"][0]
    assert body["en"]["reply.confirm"] == CATALOG["reply.confirm"][1]
    assert all(set(body[lang]) == set(CATALOG) for lang in LANGS)


# ---- session and tokens -------------------------------------------------------------------------


def test_the_session_names_the_tokens_user_and_the_systems_now_in_their_zone() -> None:
    page = client(SECRET)
    token = issue_token("alice", SECRET, tz="Europe/Berlin")
    session = page.get("/web/session", headers={"Authorization": f"Bearer {token}"})
    assert session.status_code == 200
    assert session.json() == {"user_id": "alice", "tz": "Europe/Berlin", "now": "2026-09-24T04:00:00+02:00"}
    plain = page.get("/web/session", headers={"Authorization": f"Bearer {issue_token('bob', SECRET)}"})
    assert plain.json()["tz"] == "Asia/Shanghai"


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer",
        "Basic abc",
        "Bearer not-a-jwt",
        f"Bearer {issue_token('eve', 'another-secret-entirely-0123456789')}",
    ],
)
def test_a_missing_or_refused_token_is_a_401(authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = client(SECRET).get("/web/session", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.headers["www-authenticate"] == "Bearer"


def test_development_mode_mints_a_token_for_a_user_name() -> None:
    page = client(dev_signin=True)
    assert 'id="dev-form"' in page.get("/").text
    minted = page.post("/web/dev-token", json={"user": "  alice  ", "tz": "Europe/Berlin"})
    assert minted.status_code == 200
    assert minted.headers["cache-control"] == "no-store"
    principal = verify_token(minted.json()["token"], SECRET, "Asia/Shanghai")
    assert (principal.user_id, principal.tz) == ("alice", "Europe/Berlin")


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b'{"user": ""}',
        b'{"user": "   "}',
        b'{"user": 7}',
        b'{"user": "a", "tz": "Mars/Base"}',
        b'{"user": "a", "admin": true}',
        ('{"user": "' + "x" * 129 + '"}').encode(),
    ],
)
def test_development_mode_refuses_a_bad_request(body: bytes) -> None:
    response = client(dev_signin=True).post("/web/dev-token", content=body)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"


def test_without_development_sign_in_there_is_no_minting_at_all() -> None:
    page = client(SECRET)
    assert "dev-form" not in page.get("/").text
    response = page.post("/web/dev-token", json={"user": "alice"})
    assert response.status_code == 404
    assert "token" not in response.json()


def test_the_template_and_files_ship_with_the_package() -> None:
    # The wheel takes everything under the gateway's source folder; nothing here lives elsewhere.
    package = Path(__file__).resolve().parents[1] / "src" / "calagent" / "gateway" / "web"
    assert (package / "templates" / "index.html").is_file()
    assert all((package / "static" / name).is_file() for name in STATIC_FILES)
