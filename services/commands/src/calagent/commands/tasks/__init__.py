"""Tasks placed in free time (contract §21): writing a task and its blocks (`service`), how tasks
lie in the user's time (`time`), a held change of a task confirmed (`offers`) and what a write
leads to for the blocks (`replans`), over the pure planning in `tasks/domain/`. The task rows'
SQL stays in `adapters/`, the VTODO codec in `ical/`, the sync with a server in `caldav/`."""
