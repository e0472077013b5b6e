"""Settings every service reads from the environment (contract §1)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from calagent.contracts.settings import DEFAULT_ZONE

# Where `calagent up` keeps the token secret it generated when CALAGENT_AUTH_SECRET is unset (in
# the data dir, 0600); `calagent token` and the services it starts use the same one.
AUTH_SECRET_FILE = "auth-secret"
# HS256 with a shorter key is guessable offline from one token.
MIN_AUTH_SECRET_CHARS = 32


def check_auth_secret(value: str, origin: str) -> str:
    if len(value.strip()) < MIN_AUTH_SECRET_CHARS:
        state = "empty" if not value.strip() else f"{len(value.strip())} characters"
        raise ValueError(
            f"{origin} is {state}: a token secret needs at least {MIN_AUTH_SECRET_CHARS} characters "
            "(e.g. `openssl rand -hex 32`); or unset CALAGENT_AUTH_SECRET and let `calagent up` "
            "generate one"
        )
    return value


LOCALIZED_CALENDARS: dict[str, tuple[str, ...]] = {
    "zh": ("工作", "家庭", "个人"),
    "en": ("Work", "Family", "Personal"),
}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", populate_by_name=True)

    nats_url: str | None = Field(default=None, alias="NATS_URL")
    database_url: str | None = Field(default=None, alias="DATABASE_URL")
    data_dir: Path = Field(default=Path(".calagent"), alias="CALAGENT_DATA_DIR")
    openai_base_url: str | None = Field(default=None, alias="OPENAI_BASE_URL")
    openai_api_key: str | None = Field(default=None, alias="OPENAI_API_KEY")
    model: str = Field(default="qwen-max", alias="CALAGENT_MODEL")
    # None: taken from `<data_dir>/auth-secret` when that exists (see `require_auth_secret`).
    auth_secret: str | None = Field(default=None, alias="CALAGENT_AUTH_SECRET")
    default_tz: str = Field(default=DEFAULT_ZONE, alias="CALAGENT_DEFAULT_TZ")
    # None: a new user's calendars are named in their language (`calendars_for`).
    default_calendars: str | None = Field(default=None, alias="CALAGENT_DEFAULT_CALENDARS")
    holiday_country: str = Field(default="CN", alias="CALAGENT_HOLIDAY_COUNTRY")
    now: str | None = Field(default=None, alias="CALAGENT_NOW")
    session_gap_minutes: int = Field(default=120, ge=1, alias="CALAGENT_SESSION_GAP_MINUTES")
    offer_window_minutes: int = Field(default=30, ge=0, alias="CALAGENT_OFFER_WINDOW_MINUTES")
    otlp_endpoint: str | None = Field(default=None, alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    http_port: int = Field(default=8080, ge=0, le=65535, alias="CALAGENT_HTTP_PORT")
    stub_ttl_minutes: int = Field(default=30, ge=1, alias="CALAGENT_STUB_TTL_MINUTES")
    working_hours: str = Field(default="09:00-18:00", alias="CALAGENT_WORKING_HOURS")
    # How long the solver may improve on the greedy plan of the user's tasks (contract §21).
    plan_budget_s: float = Field(default=2.0, ge=0, le=60, alias="CALAGENT_PLAN_BUDGET_S")
    # Tried when the primary model keeps failing (contract §17); the base URL defaults to the primary's.
    fallback_model: str | None = Field(default=None, alias="CALAGENT_FALLBACK_MODEL")
    fallback_base_url: str | None = Field(default=None, alias="CALAGENT_FALLBACK_BASE_URL")
    fallback_api_key: str | None = Field(default=None, alias="CALAGENT_FALLBACK_API_KEY", repr=False)
    # Attempts per endpoint and model call; failed attempts in a row that open an endpoint's
    # circuit, and how long it stays open before one probe is let through.
    model_attempts: int = Field(default=3, ge=1, le=10, alias="CALAGENT_MODEL_ATTEMPTS")
    model_backoff_s: float = Field(default=0.5, ge=0, alias="CALAGENT_MODEL_BACKOFF_S")
    circuit_failures: int = Field(default=5, ge=1, alias="CALAGENT_MODEL_CIRCUIT_FAILURES")
    circuit_open_s: float = Field(default=30.0, gt=0, alias="CALAGENT_MODEL_CIRCUIT_OPEN_S")
    # Per user (contract §17), checked at the gateway: tokens a day (unset: no limit) and turns a
    # minute (0: no limit).
    user_daily_tokens: int | None = Field(default=None, ge=0, alias="CALAGENT_USER_DAILY_TOKENS")
    user_turns_per_minute: int = Field(default=30, ge=0, alias="CALAGENT_USER_TURNS_PER_MINUTE")
    model_timeout_s: float = Field(default=60.0, gt=0, alias="CALAGENT_MODEL_TIMEOUT_S")
    turn_timeout_s: float = Field(default=90.0, gt=0, alias="CALAGENT_TURN_TIMEOUT_S")
    # Copies of every JetStream stream, durable consumer and KV bucket: the number of NATS cluster
    # nodes (`calagent up --nats-cluster N` sets it), at most JetStream's 5.
    nats_replicas: int = Field(default=1, ge=1, le=5, alias="CALAGENT_NATS_REPLICAS")
    agent_concurrency: int = Field(default=512, ge=1, le=10000, alias="CALAGENT_AGENT_CONCURRENCY")
    # The page offers a sign-in by typing any user name, which mints a token for whoever asks:
    # for a developer's own machine only, never on by default.
    web_dev_signin: bool = Field(default=False, alias="CALAGENT_WEB_DEV_SIGNIN")
    # Sign-in with OpenID Connect (contract §18): offered when all three are set. The name on the
    # page's button defaults to the issuer's host.
    oidc_issuer: str | None = Field(default=None, alias="CALAGENT_OIDC_ISSUER")
    oidc_client_id: str | None = Field(default=None, alias="CALAGENT_OIDC_CLIENT_ID")
    oidc_client_secret: str | None = Field(default=None, alias="CALAGENT_OIDC_CLIENT_SECRET")
    oidc_name: str | None = Field(default=None, alias="CALAGENT_OIDC_NAME")
    # Connected CalDAV accounts: the Fernet key their passwords are encrypted with (unset: a key
    # file in the data dir, made 0600 on first use), the outbox sweep and the inbound sync period.
    credentials_key: str | None = Field(default=None, alias="CALAGENT_CREDENTIALS_KEY", repr=False)
    caldav_sweep_s: float = Field(default=5.0, gt=0, alias="CALAGENT_CALDAV_SWEEP_S")
    caldav_sync_s: float = Field(default=60.0, gt=0, alias="CALAGENT_CALDAV_SYNC_S")
    # Attempts of one delivery the server may refuse (5xx …) before it ends `rejected` (§22).
    caldav_max_attempts: int = Field(default=8, ge=1, le=100, alias="CALAGENT_CALDAV_MAX_ATTEMPTS")
    # Networks a CalDAV account may lie in besides public addresses (comma-separated CIDRs, e.g. a
    # home server's 192.168.1.0/24); loopback, private and link-local addresses are refused else.
    caldav_allow_networks: str = Field(default="", alias="CALAGENT_CALDAV_ALLOW_NETWORKS")
    # People (contract §16): where invitations are sent through (smtp:// or smtps://, with a login
    # in the URL; unset: they wait in the mail outbox), and the domain of the users' private
    # addresses (the ORGANIZER of what is sent, so replies come back).
    smtp_url: str | None = Field(default=None, alias="CALAGENT_SMTP_URL", repr=False)
    mail_domain: str = Field(default="calagent.localhost", min_length=1, alias="CALAGENT_MAIL_DOMAIN")
    # The assistant's own SMTP receiver (`host:port`; unset: none), run by the gateway, and the
    # largest message it takes.
    smtp_listen: str | None = Field(default=None, alias="CALAGENT_SMTP_LISTEN")
    mail_max_bytes: int = Field(default=1_000_000, ge=10_000, alias="CALAGENT_MAIL_MAX_BYTES")

    @field_validator(
        "nats_url",
        "database_url",
        "openai_base_url",
        "openai_api_key",
        "now",
        "otlp_endpoint",
        "credentials_key",
        "smtp_url",
        "smtp_listen",
        "fallback_model",
        "fallback_base_url",
        "fallback_api_key",
    )
    @classmethod
    def _empty_is_unset(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("user_daily_tokens", mode="before")
    @classmethod
    def _no_limit(cls, value: object) -> object:
        return None if value in ("", None) else value

    @field_validator("auth_secret")
    @classmethod
    def _secret_long_enough(cls, value: str | None) -> str | None:
        # An empty or short secret signs tokens anyone can forge or guess: refuse it at start,
        # not at the first request.
        if value is None:
            return None
        return check_auth_secret(value, "CALAGENT_AUTH_SECRET")

    @model_validator(mode="after")
    def _secret_from_data_dir(self) -> Settings:
        if self.auth_secret is None:
            path = self.auth_secret_path
            if path.is_file():
                self.auth_secret = check_auth_secret(path.read_text().strip(), str(path))
        return self

    @property
    def auth_secret_path(self) -> Path:
        return self.data_dir / AUTH_SECRET_FILE

    def require_auth_secret(self) -> str:
        """The token secret, or a refusal that says how to provide one."""
        if self.auth_secret is None:
            raise RuntimeError(
                f"no token secret: CALAGENT_AUTH_SECRET is unset and {self.auth_secret_path.resolve()} "
                f"does not exist. Set CALAGENT_AUTH_SECRET (at least {MIN_AUTH_SECRET_CHARS} characters, "
                "e.g. `openssl rand -hex 32`), or start the system with `calagent up`, which generates one."
            )
        return self.auth_secret

    @property
    def oidc_enabled(self) -> bool:
        """Sign-in with OpenID Connect is offered only when issuer, client id and secret are all set."""
        return bool(self.oidc_issuer and self.oidc_client_id and self.oidc_client_secret)

    @property
    def oidc_display_name(self) -> str:
        """The issuer's name on "Sign in with …": CALAGENT_OIDC_NAME, else the issuer's host."""
        if self.oidc_name:
            return self.oidc_name
        issuer = self.oidc_issuer or ""
        return urlsplit(issuer).hostname or issuer

    @property
    def calendars(self) -> tuple[str, ...]:
        """The calendars a new user starts with when nothing says their language."""
        return self.calendars_for(None)

    def calendars_for(self, lang: str | None) -> tuple[str, ...]:
        """The calendars a new user starts with: the operator's list when CALAGENT_DEFAULT_CALENDARS
        is set, else the default names in the user's language (Chinese when it is unknown)."""
        if self.default_calendars is not None:
            names = tuple(n.strip() for n in self.default_calendars.split(",") if n.strip())
            if names:
                return names
        return LOCALIZED_CALENDARS.get(lang or "zh", LOCALIZED_CALENDARS["zh"])

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
