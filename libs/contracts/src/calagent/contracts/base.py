"""The base every wire model shares: frozen, strict about unknown fields."""

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    # Frozen so a message cannot be mutated after validation; `extra="forbid"` so a typo or a field
    # from a newer producer fails loudly at the edge instead of being silently dropped.
    model_config = ConfigDict(frozen=True, extra="forbid")
