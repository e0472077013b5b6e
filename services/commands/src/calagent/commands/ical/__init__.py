"""The iCalendar codec (RFC 5545), pure: an object read into rows (`parse`), rows patched back
into the object they came from (`patch`), rows rendered as a fresh object or as the feed
(`render`); the attendees and the times of an object (`attendees`, `zones`). CalDAV, the feeds
and the invitations by mail all go through it."""
