"""The page the gateway serves at `/`: chat, the pending command, the week, where the time went.

It is a client of the public HTTP API like any other (`/v1/chat` with SSE, `/v1/events`,
`/v1/commands/active`, `/v1/turns/{id}/timeline`, `/v1/feeds`); the routes here only serve the
page itself and what a browser tab needs besides the API:

- `GET /` — the page, rendered by Jinja2 in the negotiated language, with a Content-Security-Policy
  that allows nothing inline and nothing from elsewhere;
- `GET /web/static/{name}` — the script's modules, the style sheet and the icon (a fixed list, no
  directory);
- `GET /web/i18n.json` — every string of the page in both languages;
- `GET /web/session` (bearer or session cookie) — who the token names, their zone and the system's
  "now" there, so the page checks a pasted token and counts down and lays out the week in business
  time; signed in by the cookie, also the CSRF token the page sends on every change;
- `POST /web/dev-token` — only while tokens are signed with the public development secret: a
  token for a user name. The secret is public then, so this adds no power anyone lacks.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined, Template, select_autoescape
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from calagent.contracts.settings import valid_zone_name
from calagent.gateway.auth import MAX_USER_ID_CHARS, AuthError, issue_token
from calagent.gateway.errors import error_json
from calagent.gateway.session import cookie_session, csrf_token
from calagent.gateway.state import signed_in
from calagent.gateway.web.i18n import LANG_COOKIE, catalog, catalogs, negotiate
from calagent.runtime.clock import Clock
from calagent.runtime.settings import Settings

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

# The only files `/web/static/` serves, with their media types.
# The script is ES modules, one per concern (`app.js` imports the rest).
SCRIPT_MODULES = (
    "app.js",
    "api.js",
    "calendar.js",
    "cards.js",
    "changes.js",
    "chat.js",
    "dates.js",
    "details.js",
    "i18n.js",
    "session.js",
    "settings.js",
    "state.js",
    "tasks.js",
    "timeline.js",
)
STATIC_FILES: dict[str, str] = {
    **dict.fromkeys(SCRIPT_MODULES, "text/javascript; charset=utf-8"),
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}

# Nothing inline, nothing from elsewhere: scripts and styles come only from files of this origin.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "form-action 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    # A feed address shown on the page is a credential: no Referer carries anything anywhere.
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
ASSET_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}


class DevTokenRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    user: StrictStr = Field(min_length=1, max_length=MAX_USER_ID_CHARS)
    tz: StrictStr | None = None


def dev_mode(settings: Settings) -> bool:
    """The page mints a token for any typed user name (CALAGENT_WEB_DEV_SIGNIN, off by default)."""
    return settings.web_dev_signin


@cache
def page_template() -> Template:
    """The page, compiled once per process: compiling it took most of the time `create_app` did."""
    templates = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(("html",)),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return templates.get_template("index.html")


def page_router(settings: Settings, clock: Clock) -> APIRouter:
    """The page's routes, for `app.include_router`."""
    router = APIRouter(include_in_schema=False)
    page = page_template()
    texts = catalogs()

    @router.api_route("/", methods=["GET", "HEAD"], response_class=HTMLResponse)
    async def index(request: Request) -> HTMLResponse:
        lang = negotiate(request.headers.get("accept-language"), request.cookies.get(LANG_COOKIE))
        strings = catalog(lang)
        html = page.render(
            lang=lang,
            t=strings.__getitem__,
            dev_mode=dev_mode(settings),
            oidc_name=settings.oidc_display_name if settings.oidc_enabled else None,
            default_tz=settings.default_tz,
        )
        return HTMLResponse(
            html, headers={**PAGE_HEADERS, "Content-Language": lang, "Vary": "Accept-Language, Cookie"}
        )

    @router.get("/web/static/{name}")
    async def static(name: str) -> Response:
        media_type = STATIC_FILES.get(name)
        if media_type is None:
            return error_json(404, "no such file", "not_found")
        return FileResponse(STATIC / name, media_type=media_type, headers=ASSET_HEADERS)

    @router.get("/web/i18n.json")
    async def strings() -> JSONResponse:
        return JSONResponse(texts, headers=ASSET_HEADERS)

    @router.get("/web/session")
    async def session(request: Request) -> JSONResponse:
        try:
            principal = signed_in(request)
            # Signed in by the cookie (no bearer): the page learns the CSRF token it must send.
            session = (
                None if request.headers.get("authorization") else cookie_session(request, settings, clock)
            )
        except AuthError as exc:
            return error_json(401, str(exc), "unauthorized", headers={"WWW-Authenticate": "Bearer"})
        now = clock.now().astimezone(ZoneInfo(principal.tz))
        body: dict[str, str] = {"user_id": principal.user_id, "tz": principal.tz, "now": now.isoformat()}
        if session is not None:
            body["csrf_token"] = csrf_token(session, settings.require_auth_secret())
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    @router.post("/web/dev-token")
    async def dev_token(request: Request) -> JSONResponse:
        if not dev_mode(settings):
            # Not offered at all once a real secret is configured.
            return error_json(404, "not found", "not_found")
        try:
            body = DevTokenRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            message = "; ".join(
                f"body.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            return error_json(422, message, "invalid_request")
        user = body.user.strip()
        if not user:
            return error_json(422, "body.user: the user name is empty", "invalid_request")
        if body.tz is not None and not valid_zone_name(body.tz):
            return error_json(422, "body.tz: not an IANA time zone", "invalid_request")
        token = issue_token(user, settings.require_auth_secret(), tz=body.tz)
        return JSONResponse({"token": token}, headers={"Cache-Control": "no-store"})

    return router
