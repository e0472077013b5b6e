"""Undo (contract §15): a committed change written back to what it altered, as one more command.

The change is the caller's (looked up by user and id together, so another user's id is answered
like one that does not exist), not undone yet, and every row it touched is still as it left it;
otherwise nothing is written and the reason is the answer. The rows go back to their `before`
(a removed event comes back with its id, UID, object and every property), in one transaction that
is itself logged as a change (`undoes`), so it can be undone in turn; the touched resources get
their outbox rows like any write, so a connected calendar receives the same.

A change that added a task (contract §21: its blocks, made with the task in one command) is undone
as the task: the task goes with its blocks. Blocks whose task is gone are never brought back.
"""

from __future__ import annotations

from calagent.commands.domain.changelog import (
    changed_since,
    event_of,
    restore_plan,
    task_made_by,
    tasks_brought_back,
    tasks_of_blocks,
)
from calagent.commands.txn import Txn, error_result
from calagent.commands.views import change_out, event_out
from calagent.contracts.commands import ChangeKind, CommandResult, RevertChange

NOT_FOUND = "no change with that id"
# What an undo of each kind of change does to the calendar.
_INVERSE: dict[ChangeKind, ChangeKind] = {"created": "deleted", "deleted": "created", "updated": "updated"}


class Undo:
    async def revert(self, txn: Txn, command: RevertChange) -> CommandResult:
        uow, user = txn.uow, txn.user_id
        if command.change_id is not None:
            change = await uow.changes.get_change(user, command.change_id)
            if change is None:
                return error_result("not_found", NOT_FOUND)
        else:
            change = await uow.changes.latest_change(user, command.turn_id)
            if change is None:
                return error_result("nothing_to_undo", "there is no change to undo")
        if change.undone_by is not None:
            return error_result("already_undone", "that change was undone already")
        current = await uow.changes.current_rows(user, [r.event_id for r in change.rows])
        if changed_since(change, current):
            return error_result(
                "changed_since", "the event was changed again after that change; nothing was undone"
            )
        made: str | None = None
        if touched := tasks_of_blocks(change):
            existing = await uow.tasks.created_at(user, sorted(touched))
            if tasks_brought_back(change) - existing.keys():
                # Blocks of a task no longer there would be placed for nothing (an undo of the
                # undo of an added task): the task itself is not in the log to bring back.
                return error_result(
                    "changed_since", "the task of these blocks was removed since; nothing was undone"
                )
            made = task_made_by(change, existing)
        context = txn.log_as(scope=change.scope, undoes=change.id)
        await uow.changes.restore_rows(user, restore_plan(change), current)
        if made is not None:
            # Undoing "add task X" takes X away with its blocks, not only the blocks (which would
            # leave X at risk, or placed again by the next write).
            await uow.tasks.delete_task(user, made)
        await uow.changes.mark_undone(user, change.id, context.id)
        primary = change.primary
        # The receipt is read back from the rows as they are now, not from the log.
        now = await uow.changes.current_rows(user, [primary.event_id])
        restored = now.get(primary.event_id)
        return CommandResult(
            status=_INVERSE[change.kind],
            persisted=True,
            event=event_out(event_of(restored), txn.tz) if restored is not None else None,
            before=event_out(event_of(primary.after), txn.tz) if primary.after is not None else None,
            undid=change_out(change, txn.tz).model_copy(update={"undone_by": context.id}),
            change_id=context.id,
        )
