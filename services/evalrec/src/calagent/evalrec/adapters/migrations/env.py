from alembic import context

from calagent.evalrec.adapters.models import metadata
from calagent.runtime.db import run_env

run_env(context.config, metadata)
