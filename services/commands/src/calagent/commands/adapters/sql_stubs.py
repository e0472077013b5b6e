"""Stubs (the commands waiting for an answer) and the plans made from them."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import BindParameter, Row, Select, String, bindparam, select, text, update

from calagent.commands.adapters.sql_core import SqlSession
from calagent.commands.adapters.tables import ACTIVE_SQL, OFFERED_SQL, plans, stubs
from calagent.commands.domain.model import Stub
from calagent.commands.domain.payloads import payload_json, payload_of
from calagent.contracts.commands import PlanOut, StubSlots
from calagent.contracts.people import Attendee


def active_stub_of(user_id: BindParameter[str]) -> Select[Any]:
    """The user's active stub, locked (a write that reads it changes it next)."""
    return select(stubs).where(stubs.c.user_id == user_id, text(OFFERED_SQL)).with_for_update()


# Read by every command: built once, its parameter bound per call.
ACTIVE_STUB = active_stub_of(bindparam("user_id", type_=String))


def stub_of(row: Row[Any]) -> Stub:
    return Stub(
        id=row.id,
        user_id=row.user_id,
        title=row.title,
        slots=StubSlots.model_validate(row.slots),
        status=row.status,
        expires_at=row.expires_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
        candidates=tuple(date.fromisoformat(d) for d in row.candidates),
        conflict_event_ids=tuple(row.conflict_event_ids),
        hold_reason=row.hold_reason,
        requested_hold=row.requested_hold,
        confirmed=row.confirmed,
        proposed_start=row.proposed_start,
        proposed_end=row.proposed_end,
        created_by_turn=row.created_by_turn,
        kind=row.kind,
        payload=payload_of(row.kind, row.change),
        attendee_query=row.attendee_query,
        attendee_candidates=tuple(Attendee.model_validate(a) for a in row.attendee_candidates),
        recipients=tuple(Attendee.model_validate(a) for a in row.recipients),
        waiting_since=row.waiting_since,
    )


def _stub_values(stub: Stub) -> dict[str, object]:
    return {
        "title": stub.title,
        "slots": stub.slots.model_dump(mode="json"),
        "status": stub.status,
        "candidates": [d.isoformat() for d in stub.candidates],
        "conflict_event_ids": list(stub.conflict_event_ids),
        "hold_reason": stub.hold_reason,
        "requested_hold": stub.requested_hold,
        "confirmed": stub.confirmed,
        "proposed_start": stub.proposed_start,
        "proposed_end": stub.proposed_end,
        "expires_at": stub.expires_at,
        "updated_at": stub.updated_at,
        "kind": stub.kind,
        "change": payload_json(stub.kind, stub.payload),
        "attendee_query": stub.attendee_query,
        "attendee_candidates": [a.model_dump(mode="json") for a in stub.attendee_candidates],
        "recipients": [a.model_dump(mode="json") for a in stub.recipients],
        "waiting_since": stub.waiting_since,
    }


class SqlStubs:
    def __init__(self, session: SqlSession) -> None:
        self.session = session

    async def get_stub(self, user_id: str, stub_id: str) -> Stub | None:
        row = (
            await self.session.run(
                select(stubs).where(stubs.c.id == stub_id, stubs.c.user_id == user_id).with_for_update()
            )
        ).first()
        return stub_of(row) if row is not None else None

    async def active_stub(self, user_id: str) -> Stub | None:
        row = (await self.session.run(ACTIVE_STUB, {"user_id": user_id})).first()
        return stub_of(row) if row is not None else None

    async def waiting_stubs(self, user_id: str) -> list[Stub]:
        """The offers from outside waiting beside the conversation, oldest first (lapsed ones
        included: the caller ends or skips them). Not locked: a writer holds the user's lock."""
        found = await self.session.run(
            select(stubs)
            .where(stubs.c.user_id == user_id, stubs.c.waiting_since.is_not(None), text(ACTIVE_SQL))
            .order_by(stubs.c.seq)
        )
        return [stub_of(row) for row in found]

    async def insert_stub(self, stub: Stub) -> None:
        await self.session.run(
            stubs.insert().values(
                id=stub.id,
                user_id=stub.user_id,
                created_at=stub.created_at,
                created_by_turn=stub.created_by_turn,
                **_stub_values(stub),
            )
        )

    async def update_stub(self, stub: Stub) -> None:
        await self.session.run(
            update(stubs)
            .where(stubs.c.id == stub.id, stubs.c.user_id == stub.user_id)
            .values(**_stub_values(stub))
        )

    # ---- plans -----------------------------------------------------------------------------------

    async def insert_plan(self, user_id: str, plan: PlanOut, *, stub_id: str, key: str) -> None:
        await self.session.run(
            plans.insert().values(
                id=plan.id,
                user_id=user_id,
                trigger=plan.trigger,
                steps=list(plan.steps),
                status=plan.status,
                stub_id=stub_id,
                created_by_key=key,
                created_at=plan.created_at,
                updated_at=plan.created_at,
            )
        )

    async def set_plan_status(self, user_id: str, plan_id: str, status: str, at: datetime) -> None:
        await self.session.run(
            update(plans)
            .where(plans.c.id == plan_id, plans.c.user_id == user_id)
            .values(status=status, updated_at=at)
        )

    async def plans(self, user_id: str) -> list[PlanOut]:
        rows = await self.session.run(
            select(plans)
            .where(plans.c.user_id == user_id, plans.c.status != "deleted")
            .order_by(plans.c.created_at.desc(), plans.c.id)
        )
        return [
            PlanOut(
                id=r.id, trigger=r.trigger, steps=tuple(r.steps), status=r.status, created_at=r.created_at
            )
            for r in rows
        ]

    async def delete_plan(self, user_id: str, plan_id: str, at: datetime) -> bool:
        result = await self.session.run(
            update(plans)
            .where(plans.c.id == plan_id, plans.c.user_id == user_id, plans.c.status != "deleted")
            .values(status="deleted", updated_at=at)
        )
        return bool(getattr(result, "rowcount", 0))
