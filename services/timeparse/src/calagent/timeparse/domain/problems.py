"""Why a symbol has no date: the error a resolver returns, and the exception that carries it
between the resolver's helpers (never out of the module that catches it)."""

from __future__ import annotations

from dataclasses import dataclass

from calagent.contracts.time import ErrorCode

__all__ = ["InvalidSymbolError", "SymbolProblem"]


@dataclass(frozen=True, slots=True)
class SymbolProblem:
    code: ErrorCode
    message: str


class InvalidSymbolError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.problem = SymbolProblem(code, message)
