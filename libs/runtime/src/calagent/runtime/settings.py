"""Settings every service reads from the environment (contract §1)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEV_AUTH_SECRET = "calagent-development-secret-change-me"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", populate_by_name=True)

    nats_url: str | None = Field(default=None, alias="NATS_URL")
    database_url: str | None = Field(default=None, alias="DATABASE_URL")
    data_dir: Path = Field(default=Path(".calagent"), alias="CALAGENT_DATA_DIR")
    openai_base_url: str | None = Field(default=None, alias="OPENAI_BASE_URL")
    openai_api_key: str | None = Field(default=None, alias="OPENAI_API_KEY")
    model: str = Field(default="qwen-max", alias="CALAGENT_MODEL")
    auth_secret: str = Field(default=DEV_AUTH_SECRET, alias="CALAGENT_AUTH_SECRET")
    default_tz: str = Field(default="Asia/Shanghai", alias="CALAGENT_DEFAULT_TZ")
    default_calendars: str = Field(default="工作,家庭,个人", alias="CALAGENT_DEFAULT_CALENDARS")
    holiday_country: str = Field(default="CN", alias="CALAGENT_HOLIDAY_COUNTRY")
    now: str | None = Field(default=None, alias="CALAGENT_NOW")
    session_gap_minutes: int = Field(default=120, ge=1, alias="CALAGENT_SESSION_GAP_MINUTES")
    offer_window_minutes: int = Field(default=30, ge=0, alias="CALAGENT_OFFER_WINDOW_MINUTES")
    otlp_endpoint: str | None = Field(default=None, alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    http_port: int = Field(default=8080, ge=0, le=65535, alias="CALAGENT_HTTP_PORT")
    stub_ttl_minutes: int = Field(default=30, ge=1, alias="CALAGENT_STUB_TTL_MINUTES")
    working_hours: str = Field(default="09:00-18:00", alias="CALAGENT_WORKING_HOURS")
    model_timeout_s: float = Field(default=60.0, gt=0, alias="CALAGENT_MODEL_TIMEOUT_S")
    turn_timeout_s: float = Field(default=90.0, gt=0, alias="CALAGENT_TURN_TIMEOUT_S")
    agent_concurrency: int = Field(default=512, ge=1, le=10000, alias="CALAGENT_AGENT_CONCURRENCY")
    # Connected CalDAV accounts: the Fernet key their passwords are encrypted with (unset: a key
    # file in the data dir, made 0600 on first use), the outbox sweep and the inbound sync period.
    credentials_key: str | None = Field(default=None, alias="CALAGENT_CREDENTIALS_KEY", repr=False)
    caldav_sweep_s: float = Field(default=5.0, gt=0, alias="CALAGENT_CALDAV_SWEEP_S")
    caldav_sync_s: float = Field(default=60.0, gt=0, alias="CALAGENT_CALDAV_SYNC_S")

    @field_validator(
        "nats_url",
        "database_url",
        "openai_base_url",
        "openai_api_key",
        "now",
        "otlp_endpoint",
        "credentials_key",
    )
    @classmethod
    def _empty_is_unset(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("auth_secret")
    @classmethod
    def _secret_not_blank(cls, value: str) -> str:
        # An empty secret would sign and accept tokens anyone can forge, and the JWT library
        # refuses it at the first request (a 500 on every call): refuse it at start instead.
        if not value.strip():
            raise ValueError("CALAGENT_AUTH_SECRET is set but empty: set a secret, or unset it")
        return value

    @property
    def calendars(self) -> tuple[str, ...]:
        names = tuple(n.strip() for n in self.default_calendars.split(",") if n.strip())
        return names or ("工作",)

    def require_nats(self) -> str:
        if not self.nats_url:
            raise RuntimeError("NATS_URL is not set")
        return self.nats_url

    def require_database(self) -> str:
        if not self.database_url:
            raise RuntimeError("DATABASE_URL is not set")
        return self.database_url


def load_settings() -> Settings:
    return Settings()
