"""Our change to a task offered again after the connected calendar changed the task too (a held
stub of kind `task_change`, contract §22): confirming it applies the fields our change made to
the task as it is now — the server's version — on the path `PATCH /v1/tasks/{id}` takes (placed
afresh, and delivered again through the outbox). Our removal offered again removes the task on
the path `DELETE /v1/tasks/{id}` takes."""

from __future__ import annotations

from calagent.commands.domain.model import Stub
from calagent.commands.domain.payloads import HeldTaskChange
from calagent.commands.pending import Pending
from calagent.commands.tasks.domain.changes import apply_patch
from calagent.commands.tasks.service import NOT_FOUND, Tasks
from calagent.commands.txn import Txn, error_result
from calagent.commands.views import stub_out
from calagent.contracts.commands import CommandResult


class TaskOffers:
    def __init__(self, tasks: Tasks, pending: Pending) -> None:
        self.tasks = tasks
        self.pending = pending

    async def confirm(self, txn: Txn, stub: Stub) -> CommandResult:
        payload = stub.payload
        assert isinstance(payload, HeldTaskChange)
        uow = txn.uow
        found = await uow.tasks.tasks_by_ids(txn.user_id, [payload.task_id])
        if not found:
            return error_result("not_found", NOT_FOUND)
        if payload.patch is None:
            # Our removal, lost to the calendar's change: the task goes as `DELETE /v1/tasks/{id}`
            # takes it (its blocks along), and its removal is delivered again.
            await self.tasks.remove(uow, txn.user_id, payload.task_id, txn.tz, txn.now)
            done = await self.pending.store(txn, self.pending.of(stub).finish("deleted", txn.now))
            return CommandResult(status="deleted", persisted=True, stub=stub_out(done, (), txn.tz))
        task = apply_patch(found[0], payload.patch, txn.now)
        await uow.tasks.update_task(txn.user_id, task, txn.now)
        moved = await self.tasks.settle(
            uow, txn.user_id, task, txn.tz, txn.now, turn_id=txn.envelope.turn_id, lang=txn.envelope.lang
        )
        done = await self.pending.store(txn, self.pending.of(stub).finish("updated", txn.now))
        result = await self.tasks.task_result(txn, task, "updated", moved)
        return result.model_copy(update={"stub": stub_out(done, (), txn.tz)})
