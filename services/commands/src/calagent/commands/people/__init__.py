"""People (contract §16): contacts, the user's private mail address, invitations by e-mail."""
