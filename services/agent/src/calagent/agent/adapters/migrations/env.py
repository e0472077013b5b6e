from alembic import context

from calagent.agent.adapters.tables import metadata
from calagent.runtime.db import run_env

run_env(context.config, metadata)
