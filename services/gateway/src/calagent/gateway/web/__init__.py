"""The page the gateway serves at `/` (issue 14): see `routes` for what it serves and why."""

from calagent.gateway.web.routes import page_router

__all__ = ["page_router"]
