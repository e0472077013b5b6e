"""Two-way sync with connected CalDAV accounts (contract §12): accounts, the outbox worker that
delivers committed writes, and the inbound sync that brings the server's changes back."""
