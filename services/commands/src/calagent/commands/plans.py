"""An automation plan offered to the user: held until they confirm it, then kept as confirmed;
deleted when they ask (`DeletePlan`, sent on the query path by `DELETE /v1/plans/{id}`)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from calagent.commands.domain.model import Stub
from calagent.commands.domain.payloads import HeldPlan
from calagent.commands.domain.pending import Ask
from calagent.commands.pending import Pending
from calagent.commands.ports import Store
from calagent.commands.txn import Txn, new_id
from calagent.commands.views import stub_out
from calagent.contracts.commands import CommandResult, PlanOut, ProposePlan
from calagent.contracts.queries import DeletePlan, QueryResult
from calagent.runtime.clock import Clock


class Plans:
    def __init__(self, pending: Pending) -> None:
        self.pending = pending

    async def propose(self, txn: Txn, command: ProposePlan) -> CommandResult:
        plan = PlanOut(
            id=new_id(),
            trigger=command.trigger,
            steps=command.steps,
            status="offered",
            created_at=txn.now,
        )
        ask = Ask(title=command.trigger[:200], hold_reason="automation_plan", payload=HeldPlan(plan=plan))
        stub, superseded = await self.pending.hold(txn, ask, "plan")
        await txn.uow.stubs.insert_plan(txn.user_id, plan, stub_id=stub.id, key=txn.key)
        return CommandResult(status="planned", stub=stub_out(stub, (), txn.tz), superseded=superseded)

    async def confirm(self, txn: Txn, stub: Stub) -> CommandResult:
        if isinstance(stub.payload, HeldPlan):
            await txn.uow.stubs.set_plan_status(txn.user_id, stub.payload.plan.id, "confirmed", txn.now)
        done = await self.pending.store(txn, self.pending.of(stub).finish("planned", txn.now))
        return CommandResult(status="planned", stub=stub_out(done, (), txn.tz))


class PlanDeletion:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def delete_plan(self, query: DeletePlan, tz: ZoneInfo) -> QueryResult:
        async with self.store.unit_of_work() as uow:
            deleted = await uow.stubs.delete_plan(query.envelope.user_id, query.plan_id, self.clock.now())
            await uow.commit()
            return QueryResult(deleted=deleted, db_ms=uow.db_ms)
