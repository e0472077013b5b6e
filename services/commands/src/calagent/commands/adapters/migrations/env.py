from alembic import context

# Every table of the schema on the one `metadata`: the people tables join it when their module loads.
from calagent.commands.adapters import tables_people  # noqa: F401
from calagent.commands.adapters.tables import metadata
from calagent.runtime.db import run_env

run_env(context.config, metadata)
