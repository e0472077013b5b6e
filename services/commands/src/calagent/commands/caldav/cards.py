"""A connected account's address books kept as the user's read-only contacts (contract §16).

Read with the account's inbound sync (the same lease, the same guarded login): each book whose
change token moved is listed, the cards whose ETag changed are parsed with `vobject` (FN → name,
EMAIL → addresses, the preferred one first, NICKNAME → aliases) and stored; a card no longer in its
book, or a book no longer on the server, goes. A card without a usable name or address is no
contact. The rows go with the account (ON DELETE CASCADE).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import vobject
from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from calagent.commands.adapters.tables import caldav_books, caldav_cards
from calagent.commands.caldav import carddav, remote, rows
from calagent.commands.domain.people import normal_address
from calagent.commands.txn import new_id
from calagent.contracts.address import EMAIL_MAX, is_address
from calagent.contracts.people import ALIASES_MAX, NAME_MAX

log = logging.getLogger("calagent.commands.caldav")


@dataclass(frozen=True)
class Card:
    name: str
    emails: tuple[str, ...]  # the preferred address first
    aliases: tuple[str, ...]


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value or "")


def _preferred(line: Any) -> bool:
    params = {k.upper(): [str(v).lower() for v in vs] for k, vs in line.params.items()}
    # vCard 3: TYPE=pref; vCard 4: PREF=1 (the lower, the more preferred; 1 is the most).
    return "pref" in params.get("TYPE", []) or params.get("PREF", [""])[0] == "1"


def _nicknames(value: Any) -> list[str]:
    # NICKNAME is a comma-separated list (RFC 6350 §6.2.3); vobject hands over its text as read.
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [part.replace("\\,", ",") for part in str(value or "").replace("\\,", "\0").split(",")]


def parse_card(body: str) -> Card | None:
    """The contact a vCard names, or None when it names nobody to invite (no name or address) or
    cannot be read: a card is someone else's text, and one odd card must not stop the sync."""
    try:
        return _parse(body)
    except Exception as exc:
        log.info("skipping an unreadable vCard: %s", type(exc).__name__)
        return None


def _parse(body: str) -> Card | None:
    contents = vobject.readOne(body).contents
    name = " ".join(_text(contents["fn"][0].value).split()) if "fn" in contents else ""
    if not name and "n" in contents:
        n = contents["n"][0].value
        name = " ".join(f"{getattr(n, 'given', '')} {getattr(n, 'family', '')}".split())
    lines = contents.get("email", [])
    ordered = [line for line in lines if _preferred(line)] + [line for line in lines if not _preferred(line)]
    emails: list[str] = []
    for line in ordered:
        address = _text(line.value).strip().removeprefix("mailto:")
        taken = {normal_address(e) for e in emails}
        if is_address(address) and len(address) <= EMAIL_MAX and normal_address(address) not in taken:
            emails.append(address)
    if not name or not emails:
        return None
    aliases: list[str] = []
    for line in contents.get("nickname", []):
        for alias in _nicknames(line.value):
            alias = " ".join(alias.split())[:NAME_MAX]
            if alias and alias != name and alias not in aliases:
                aliases.append(alias)
    return Card(name[:NAME_MAX], tuple(emails), tuple(aliases[:ALIASES_MAX]))


def _read(
    login: remote.Login, known: dict[str, carddav.Known]
) -> tuple[list[carddav.BookRead], dict[str, Card | None]]:
    found = carddav.read(login, known)
    return found, {c.href: parse_card(c.body) for book in found for c in book.changed}


class CardSync:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def sync(self, account: rows.Account) -> bool:
        """Read the account's address books into its cards; False when the server could not be
        read (what was read before stays)."""
        async with self.engine.connect() as conn:
            tokens = {
                r.url: r.token
                for r in await conn.execute(
                    select(caldav_books.c.url, caldav_books.c.token).where(
                        caldav_books.c.account_id == account.id
                    )
                )
            }
            held = (
                await conn.execute(
                    select(caldav_cards.c.book_url, caldav_cards.c.href, caldav_cards.c.etag).where(
                        caldav_cards.c.account_id == account.id
                    )
                )
            ).all()
        known = {
            url: carddav.Known(token, {c.href: c.etag for c in held if c.book_url == url})
            for url, token in tokens.items()
        }
        try:
            # Parsing too is off the event loop: vobject takes about a millisecond a card.
            found, parsed = await asyncio.to_thread(_read, account.login, known)
        except remote.RemoteError as exc:
            log.warning("the address books of account %s could not be read: %s", account.id, exc)
            return False
        await self._apply(account, found, parsed, {c.href: c.book_url for c in held})
        return True

    async def _apply(
        self,
        account: rows.Account,
        found: Sequence[carddav.BookRead],
        parsed: dict[str, Card | None],
        held: dict[str, str],
    ) -> None:
        present = [b.url for b in found]
        async with self.engine.begin() as conn:
            await conn.execute(
                delete(caldav_cards).where(
                    caldav_cards.c.account_id == account.id, caldav_cards.c.book_url.not_in(present)
                )
            )
            await conn.execute(
                delete(caldav_books).where(
                    caldav_books.c.account_id == account.id, caldav_books.c.url.not_in(present)
                )
            )
            for book in found:
                statement = pg_insert(caldav_books).values(
                    account_id=account.id, url=book.url, token=book.token
                )
                await conn.execute(
                    statement.on_conflict_do_update(
                        constraint="pk_caldav_books", set_={"token": statement.excluded.token}
                    )
                )
                if not book.listed:
                    continue
                gone = [h for h, url in held.items() if url == book.url and h not in book.members]
                unreadable: list[str] = []
                values: list[dict[str, object]] = []
                for remote_card in book.changed:
                    card = parsed.get(remote_card.href)
                    if card is None:
                        unreadable.append(remote_card.href)
                        continue
                    values.append(
                        {
                            "id": new_id(),
                            "user_id": account.user_id,
                            "account_id": account.id,
                            "book_url": book.url,
                            "href": remote_card.href,
                            "etag": remote_card.etag,
                            "name": card.name,
                            "email": card.emails[0],
                            "emails": list(card.emails),
                            "aliases": list(card.aliases),
                            "created_at": func.clock_timestamp(),
                        }
                    )
                if gone or unreadable:
                    await conn.execute(
                        delete(caldav_cards).where(
                            caldav_cards.c.account_id == account.id,
                            caldav_cards.c.href.in_(gone + unreadable),
                        )
                    )
                if values:
                    statement = pg_insert(caldav_cards).values(values)
                    await conn.execute(
                        statement.on_conflict_do_update(
                            constraint="uq_caldav_cards_href",
                            set_={
                                name: statement.excluded[name]
                                for name in ("book_url", "etag", "name", "email", "emails", "aliases")
                            },
                        )
                    )
