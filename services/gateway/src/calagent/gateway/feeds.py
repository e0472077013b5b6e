"""Private calendar feeds (contract §10): `POST /v1/feeds` makes (and rotates) the caller's
address, `GET`/`HEAD /feeds/<secret>.ics` serves it without a token. The address is its own
credential, so logs and traces keep only its shape."""

import logging
import re

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from calagent.contracts.queries import FeedCalendar, RotateFeed
from calagent.gateway.calendar import ICS_MEDIA_TYPE
from calagent.gateway.errors import DownstreamError, error_json
from calagent.gateway.state import AuthPrincipal, CurrentGateway

# A feed secret as commands makes it (`secrets.token_urlsafe`) within `FeedCalendar`'s bounds;
# anything else in a feed address is answered 404 without asking anyone.
FEED_SECRET = re.compile(r"[A-Za-z0-9_-]{16,128}")
FEED_PATH = re.compile(r"/feeds/[^/\s\"]*")
FEED_NOT_FOUND = "no calendar feed at this address"


def redact_feed_secrets(text: str) -> str:
    """A feed address is its own credential: logs and traces keep only its shape."""
    return FEED_PATH.sub("/feeds/<redacted>", text)


class RedactFeedSecrets(logging.Filter):
    """For uvicorn's access log, whose record arguments carry the request path."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_feed_secrets(a) if isinstance(a, str) else a for a in record.args)
        return True


def feeds_router() -> APIRouter:
    router = APIRouter()

    @router.post("/v1/feeds", status_code=201)
    async def rotate_feed(principal: AuthPrincipal, gw: CurrentGateway) -> JSONResponse:
        """A new private address for the caller's feed; the previous one stops working."""
        result = await gw.query(principal, RotateFeed(envelope=gw.envelope(principal)))
        secret = result.feed_secret
        if secret is None or not FEED_SECRET.fullmatch(secret):
            raise DownstreamError(502, "the commands service returned no usable feed address")
        return JSONResponse(
            {"url": f"/feeds/{secret}.ics"}, status_code=201, headers={"Cache-Control": "no-store"}
        )

    @router.get("/feeds/{secret}.ics", response_model=None)
    async def feed(secret: str, gw: CurrentGateway) -> Response:
        """No bearer: the secret is the credential. The answer is the feed or 404, nothing about
        whose it is; a malformed secret is not even asked about."""
        if not FEED_SECRET.fullmatch(secret):
            return error_json(404, FEED_NOT_FOUND)
        result = await gw.ask(FeedCalendar(secret=secret))
        if result.error is not None and result.error.code == "not_found":
            return error_json(404, FEED_NOT_FOUND)
        if result.error is not None or result.ics is None:
            raise DownstreamError(502, "the commands service could not serve the feed")
        return Response(
            result.ics,
            media_type=ICS_MEDIA_TYPE,
            headers={
                "Content-Disposition": 'inline; filename="calendar.ics"',
                "Cache-Control": "private, no-cache",
            },
        )

    # HEAD of a feed, for calendar apps that poll with it; one operation in the schema, not two
    # sharing an id.
    router.add_api_route(
        "/feeds/{secret}.ics", feed, methods=["HEAD"], include_in_schema=False, response_model=None
    )

    return router
