"""Bearer tokens: JWT HS256 signed with `CALAGENT_AUTH_SECRET` (contract §3).

Claim `sub` is the user id, optional `tz` an IANA zone, optional `aliases` the other names under
which channel bridges present this user (a Telegram handle, a display name): a wrapper from one
of them is the user, from anyone else it is third-party content. `exp` is honoured when present. Token
validity is checked against the real wall clock, never against `CALAGENT_NOW`: a frozen business
clock must not resurrect or expire credentials.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt

from calagent.contracts.settings import valid_zone_name

ALGORITHM = "HS256"
MAX_USER_ID_CHARS = 128  # the envelope's limit
MAX_ALIASES = 16


class AuthError(Exception):
    """The request carries no usable credentials; the message is safe to show to the caller."""


@dataclass(frozen=True)
class Principal:
    user_id: str
    # The zone of the user's turns and reads: the one saved in their settings, else the token's.
    tz: str
    aliases: tuple[str, ...] = ()
    # The token's own zone (or the default) when a saved zone replaced it in `tz`.
    token_tz: str | None = None

    @property
    def credential_tz(self) -> str:
        return self.token_tz or self.tz


def issue_token(
    user_id: str,
    secret: str,
    tz: str | None = None,
    ttl_days: float = 30,
    now: datetime | None = None,
    aliases: tuple[str, ...] = (),
) -> str:
    """A signed bearer token for `user_id`; `now` defaults to the real wall clock."""
    if not user_id or len(user_id) > MAX_USER_ID_CHARS:
        raise ValueError(f"a user id is 1 to {MAX_USER_ID_CHARS} characters")
    if tz is not None and not valid_zone_name(tz):
        raise ValueError(f"{tz!r} is not an IANA time zone")
    issued = now or datetime.now(UTC)
    claims: dict[str, Any] = {
        "sub": user_id,
        "iat": int(issued.timestamp()),
        "exp": int((issued + timedelta(days=ttl_days)).timestamp()),
    }
    if tz is not None:
        claims["tz"] = tz
    if aliases:
        claims["aliases"] = list(_valid_aliases(aliases))
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def verify_token(token: str, secret: str, default_tz: str) -> Principal:
    try:
        claims = jwt.decode(
            token,
            secret,
            algorithms=[ALGORITHM],
            options={"require": ["sub"], "verify_exp": True, "verify_signature": True},
        )
    except jwt.ExpiredSignatureError as exc:
        raise AuthError("the token has expired") from exc
    except jwt.InvalidSignatureError as exc:
        raise AuthError("the token signature is not valid") from exc
    except jwt.MissingRequiredClaimError as exc:
        raise AuthError("the token carries no subject (sub)") from exc
    except jwt.InvalidTokenError as exc:
        raise AuthError(f"the token is not valid: {exc}") from exc
    if "purpose" in claims:
        # A sign-in link's credential is redeemed once for a bearer token, never used as one.
        raise AuthError("the token is not a bearer token")
    user_id = claims.get("sub")
    if not isinstance(user_id, str) or not user_id.strip() or len(user_id) > MAX_USER_ID_CHARS:
        raise AuthError(f"the token subject must be a user id of 1 to {MAX_USER_ID_CHARS} characters")
    raw_aliases = claims.get("aliases", [])
    if not isinstance(raw_aliases, list) or not all(isinstance(a, str) for a in raw_aliases):
        raise AuthError("the token's aliases claim must be a list of names")
    try:
        aliases = _valid_aliases(raw_aliases)
    except ValueError as exc:
        raise AuthError(f"the token's aliases claim is not valid: {exc}") from exc
    tz = claims.get("tz")
    if tz is None:
        return Principal(user_id=user_id, tz=default_tz, aliases=aliases)
    if not isinstance(tz, str) or not valid_zone_name(tz):
        raise AuthError("the token's tz claim is not an IANA time zone")
    return Principal(user_id=user_id, tz=tz, aliases=aliases)


def _valid_aliases(aliases: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if len(aliases) > MAX_ALIASES:
        raise ValueError(f"at most {MAX_ALIASES} aliases")
    for alias in aliases:
        if not alias.strip() or len(alias) > MAX_USER_ID_CHARS or "\x00" in alias:
            raise ValueError(f"an alias is 1 to {MAX_USER_ID_CHARS} characters")
    return tuple(aliases)


def principal_from_header(authorization: str | None, secret: str, default_tz: str) -> Principal:
    if not authorization:
        raise AuthError("missing Authorization: Bearer token")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("the Authorization header must be 'Bearer <token>'")
    return verify_token(token.strip(), secret, default_tz)


# ---- one-time sign-in links (contract §18) -----------------------------------------------------

LOGIN_PURPOSE = "login"
LOGIN_LINK_TTL = timedelta(minutes=10)


@dataclass(frozen=True)
class LoginGrant:
    """A verified sign-in link: who it signs in, and its id (redeemed once)."""

    user_id: str
    tz: str | None
    link_id: str


def issue_login_token(user_id: str, secret: str, now: datetime, tz: str | None = None) -> str:
    """The credential of a one-time sign-in link, valid for ten minutes of the system's clock
    (`now` from its `Clock`, so a frozen clock freezes the link's life with it)."""
    if not user_id or len(user_id) > MAX_USER_ID_CHARS:
        raise ValueError(f"a user id is 1 to {MAX_USER_ID_CHARS} characters")
    if tz is not None and not valid_zone_name(tz):
        raise ValueError(f"{tz!r} is not an IANA time zone")
    claims: dict[str, Any] = {
        "sub": user_id,
        "purpose": LOGIN_PURPOSE,
        "jti": uuid.uuid4().hex,
        "iat": int(now.timestamp()),
        "exp": int((now + LOGIN_LINK_TTL).timestamp()),
    }
    if tz is not None:
        claims["tz"] = tz
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def read_purpose_token(
    token: str, secret: str, now: datetime, *, purpose: str, id_claim: str, invalid: str, expired: str
) -> tuple[str, str, str | None]:
    """`(user id, the token's own id, zone)` of a token minted for one `purpose` (a sign-in link,
    a session), its life checked against the system's clock; `invalid` / `expired` are what the
    user is told. A bearer token carries no purpose, so it never passes here, nor such a token as
    a bearer (`verify_token` refuses any token that has a purpose)."""
    try:
        claims = jwt.decode(
            token,
            secret,
            algorithms=[ALGORITHM],
            options={"require": ["sub", id_claim, "exp", "purpose"], "verify_exp": False},
        )
    except jwt.InvalidTokenError as exc:
        raise AuthError(invalid) from exc
    if claims.get("purpose") != purpose:
        raise AuthError(invalid)
    exp = claims.get("exp")
    if not isinstance(exp, int) or now.timestamp() >= exp:
        raise AuthError(expired)
    user_id, own_id, tz = claims.get("sub"), claims.get(id_claim), claims.get("tz")
    if not isinstance(user_id, str) or not user_id or len(user_id) > MAX_USER_ID_CHARS:
        raise AuthError(invalid)
    if not isinstance(own_id, str) or not own_id:
        raise AuthError(invalid)
    if tz is not None and (not isinstance(tz, str) or not valid_zone_name(tz)):
        raise AuthError(invalid)
    return user_id, own_id, tz


def verify_login_token(token: str, secret: str, now: datetime) -> LoginGrant:
    """A sign-in link's credential, checked against the system's clock; never a bearer token."""
    invalid = "this sign-in link is not valid"
    user_id, link_id, tz = read_purpose_token(
        token,
        secret,
        now,
        purpose=LOGIN_PURPOSE,
        id_claim="jti",
        invalid=invalid,
        expired="this sign-in link has expired; ask for a new one",
    )
    if not link_id.isalnum() or len(link_id) > 64:
        raise AuthError(invalid)
    return LoginGrant(user_id=user_id, tz=tz, link_id=link_id)
