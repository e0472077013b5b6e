"""`calagent.people.manage`: the caller's contacts and private mail address.

Everything is looked up by the envelope's user and the id together, so another user's contact id
is answered exactly like one that does not exist. The cards of a connected address book are listed
beside the user's own contacts and are read-only here: they change in the address book.
"""

from __future__ import annotations

from calagent.commands.domain.people import Contact, new_mail_address
from calagent.commands.ports import Store
from calagent.commands.txn import new_id
from calagent.contracts.address import is_address
from calagent.contracts.people import (
    AddContact,
    AnyContactCommand,
    ContactOut,
    DeleteContact,
    GetMailAddress,
    PeopleError,
    PeopleResult,
)
from calagent.runtime.clock import Clock


def _out(contact: Contact) -> ContactOut:
    # The stored contact and the wire's are the same fields (a stored one always has its time).
    return ContactOut.model_validate(contact, from_attributes=True)


class People:
    def __init__(self, store: Store, clock: Clock, mail_domain: str) -> None:
        self.store = store
        self.clock = clock
        self.mail_domain = mail_domain

    async def run(self, command: AnyContactCommand) -> PeopleResult:
        user_id = command.envelope.user_id
        async with self.store.unit_of_work() as uow:
            if isinstance(command, AddContact):
                email = command.email.strip().removeprefix("mailto:")
                if not is_address(email):
                    return PeopleResult(
                        error=PeopleError(code="invalid_email", message="not an e-mail address")
                    )
                contact = Contact(
                    id=new_id(),
                    name=command.name.strip(),
                    email=email,
                    aliases=tuple(a.strip() for a in command.aliases if a.strip()),
                    created_at=self.clock.now(),
                )
                await uow.people.add_contact(user_id, contact)
                await uow.commit()
                return PeopleResult(contact=_out(contact))
            if isinstance(command, DeleteContact):
                deleted = await uow.people.delete_contact(user_id, command.contact_id)
                await uow.commit()
                if not deleted:
                    card = any(
                        c.id == command.contact_id and c.source == "carddav"
                        for c in await uow.people.contacts(user_id)
                    )
                    if card:
                        return PeopleResult(
                            error=PeopleError(
                                code="read_only",
                                message="this contact comes from a connected address book: "
                                "change or remove it there",
                            )
                        )
                    return PeopleResult(
                        error=PeopleError(code="not_found", message="no contact with this id")
                    )
                return PeopleResult(deleted=True)
            if isinstance(command, GetMailAddress):
                address = await uow.people.mailbox(
                    user_id, new_mail_address(self.mail_domain), self.clock.now()
                )
                await uow.commit()
                return PeopleResult(address=address)
            listed = await uow.people.contacts(user_id)
            return PeopleResult(contacts=tuple(_out(c) for c in listed))
