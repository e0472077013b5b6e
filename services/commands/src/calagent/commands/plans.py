"""An automation plan offered to the user: held until they confirm it, then kept as confirmed."""

from __future__ import annotations

from calagent.commands.domain.model import Stub
from calagent.commands.domain.payloads import HeldPlan
from calagent.commands.pending import Pending
from calagent.commands.txn import Txn, new_id
from calagent.commands.views import stub_out
from calagent.contracts.commands import CommandResult, PlanOut, ProposePlan


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
        stub, ended = await self.pending.hold(
            txn,
            title=command.trigger[:200],
            reason="automation_plan",
            kind="plan",
            fields={"payload": HeldPlan(plan=plan)},
        )
        superseded = stub_out(ended, (), txn.tz) if ended is not None else None
        await txn.uow.insert_plan(txn.user_id, plan, stub_id=stub.id, key=txn.key)
        return CommandResult(status="planned", stub=stub_out(stub, (), txn.tz), superseded=superseded)

    async def confirm(self, txn: Txn, stub: Stub) -> CommandResult:
        if isinstance(stub.payload, HeldPlan):
            await txn.uow.set_plan_status(txn.user_id, stub.payload.plan.id, "confirmed", txn.now)
        done = await self.pending.move(txn, stub, "planned")
        return CommandResult(status="planned", stub=stub_out(done, (), txn.tz))
