"""Settings of the collector process (pydantic-settings, env prefix ``DRIFTLINE_``).

Nothing here reads the environment at import time: entry points call :func:`load_settings`
and pass the object down; tests build ``Settings(...)`` directly.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from collector.errors import ConfigError
from collector.sidecar import store_sidecar

ENV_PREFIX = "DRIFTLINE_"
DEFAULT_DATABASE_URL = "sqlite:///./driftline-data/driftline.db"


class Settings(BaseSettings):
    """Configuration of ``driftline collector``.

    Every field can be set as ``DRIFTLINE_<FIELD>`` (upper case). Sizes are bytes, durations
    seconds, money USD.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="SQLAlchemy URL: sqlite:///path or postgresql+psycopg://user@host/db.",
    )
    host: str = Field("127.0.0.1", description="Bind address of the HTTP and gRPC receivers.")
    http_port: int = Field(4318, ge=0, le=65535, description="OTLP/HTTP + REST port.")
    grpc_port: int = Field(4317, ge=0, le=65535, description="OTLP/gRPC port (0 = any free port).")
    grpc_enabled: bool = Field(True, description="Serve OTLP/gRPC next to OTLP/HTTP.")
    dev: bool = Field(False, description="Single tenant `default`, no API keys; loopback only.")
    auto_migrate: bool = Field(True, description="Run alembic `upgrade heads` at start-up.")
    scheduler_enabled: bool = Field(
        True, description="Run the periodic jobs (scrapes, drift, canary, judges, alerts)."
    )

    max_body_bytes: int = Field(
        64 * 1024 * 1024,
        gt=0,
        description="Largest OTLP body accepted, measured after decompression (HTTP 413 above).",
    )
    max_request_bytes: int = Field(
        8 * 1024 * 1024,
        gt=0,
        description="Largest body of a REST request (everything but OTLP): HTTP 413 as soon as "
        "Content-Length or the streamed body passes it, before the body is parsed.",
    )
    grpc_max_message_bytes: int = Field(
        16 * 1024 * 1024,
        gt=0,
        description="Largest OTLP/gRPC message received or sent (gRPC's "
        "max_receive/send_message_length): RESOURCE_EXHAUSTED above, before it is parsed.",
    )
    queue_max_spans: int = Field(
        200_000,
        gt=0,
        description="Spans waiting for the writer before HTTP 503 / gRPC UNAVAILABLE.",
    )
    writer_max_batch_spans: int = Field(
        20_000, gt=0, description="Spans written in one transaction (group commit)."
    )
    max_text_chars: int = Field(
        1_000_000,
        gt=0,
        description="Captured input/output text longer than this is truncated with a marker.",
    )
    redaction_cpu_s_per_record: float = Field(
        2.0,
        gt=0,
        description="CPU seconds of redaction for all spans of one request (spooled record); "
        "texts past it are replaced whole by a marker, never stored unscanned.",
    )
    capture_content: Literal["none", "redacted", "full"] = Field(
        "redacted",
        description="Content capture of tenants without a policy of their own: none | "
        "redacted (PII/secrets replaced before storage) | full.",
    )
    prices: Path | None = Field(
        None,
        description="JSON price file (USD per 1M tokens per model) merged over the shipped table.",
    )
    engine_metrics_urls: list[str] = Field(
        default_factory=list,
        description='Engine /metrics URLs to scrape, JSON list, e.g. ["http://127.0.0.1:8100/metrics"].',
    )
    engine_scrape_interval_s: float = Field(15.0, gt=0, description="Seconds between scrapes.")
    engine_metrics_tenant: str = Field(
        "default", description="Tenant owning scraped samples of URLs not in engine_tenants."
    )
    engine_tenants: dict[str, str] = Field(
        default_factory=dict,
        description='Engine replicas dedicated to one tenant, JSON {"scrape URL": "tenant"}: '
        "their samples and replica cost belong to that tenant.",
    )
    engine_gpu_cost_per_hour: dict[str, float] = Field(
        default_factory=dict,
        description='Replica cost, JSON {"scrape URL": usd_per_hour}: each scrape records the '
        "cost of the interval since the previous one on the replica's engine samples.",
    )
    gpu_cost_per_hour: dict[str, float] = Field(
        default_factory=dict,
        description='Self-hosted replica cost, JSON {"service.name": usd_per_hour}.',
    )
    spool_enabled: bool = Field(
        True,
        description="Acknowledge OTLP requests once fsynced to the spool; a processor writes them "
        "into the store (off: acknowledge only after the store commit, one process).",
    )
    spool_processor: Literal["process", "thread", "external"] = Field(
        "process",
        description="Where the spool processor runs: `process` (its own process, started and "
        "restarted by the collector: a second core), `thread` (inside the collector), "
        "`external` (none here: run `driftline spool process`).",
    )
    spool_processor_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="Niceness added to the spawned spool processor process (`process` mode): "
        "acknowledgements wait on the receiver, not on the processor, so on a machine short of "
        "cores the receiver gets the CPU first and a backlog drains in the idle time (0: equal).",
    )
    spool_processor_io_class: Literal["idle", "best-effort"] = Field(
        "idle",
        description="I/O scheduling class of the spawned spool processor process (`process` "
        "mode, Linux, where the disk's scheduler honours classes: mq-deadline, bfq): `idle` "
        "queues its store writes and checkpoints behind the receiver's spool fsync, on which "
        "acknowledgements wait, while the spool is less than half full (then best-effort, back "
        "to idle under a quarter: on a disk another program keeps busy an idle-class request "
        "waits up to mq-deadline's `prio_aging_expire`, 10 s); `best-effort`: the same class "
        "as every other process.",
    )
    spool_prepare_workers: int = Field(
        1,
        ge=0,
        le=64,
        description="Worker processes of the spool processor (`process` and `external` modes) "
        "that decode and prepare the next batch while the current one is written, so that the "
        "store writer has a core to itself (0: decode in the processor itself).",
    )
    spool_batch_bytes: int = Field(
        4 << 20,
        ge=64 << 10,
        le=1 << 30,
        description="Spooled bytes the processor reads, prepares and writes as one store "
        "transaction. Smaller batches commit smaller bursts of store writes, on which a "
        "receiver's spool fsync waits when both share a disk (a write-back cache flushes "
        "everything before it): on a 2-core VM, 5 pairs of `benchmarks/ingest.py`, 1 MiB "
        "against 4 MiB gave an acknowledgement p99 of 26-39 against 35-75 ms (medians 29 and "
        "44) and stored 13 % fewer spans/s (medians 3,628 and 4,182).",
    )
    spool_dir: Path = Field(
        None,  # type: ignore[assignment]  # filled from database_url by _default_spool_dir
        description="Directory of the spool's segment files, one per store. Default: "
        "`<database file>-spool` beside a SQLite database, else "
        "./driftline-data/spool-<host>-<port>-<database>.",
    )
    spool_max_bytes: int = Field(
        1 << 30, gt=0, description="Unprocessed spool bytes before receivers answer 503."
    )
    spool_keep_s: float = Field(
        86_400.0, ge=0, description="Seconds processed spool segments are kept (for replay)."
    )
    spool_stall_s: float = Field(
        60.0,
        gt=0,
        description="`/healthz` says `degraded` when the spool processor has not advanced for "
        "this many seconds with records pending (a store outage, a stuck processor).",
    )
    spool_quarantine_window_s: float = Field(
        3_600.0,
        gt=0,
        description="`/healthz` says `degraded` when spool records were quarantined (stored "
        "aside, see `driftline spool quarantine list`) within this many seconds and are still "
        "in the quarantine (`replay` or `remove` clears it).",
    )
    spool_quarantine_max_bytes: int = Field(
        256 << 20,
        gt=0,
        description="Bytes of quarantined spool records kept at most; past it the oldest are "
        "dropped whole (counted in `driftline_spool_quarantine_dropped_records`).",
    )

    lake_url: str | None = Field(
        None,
        description="Where sealed hours of calls go as Parquet: a folder or an fsspec URL "
        "(s3://bucket/lake); one lake per store. Default: `<database file>-lake` beside a "
        "SQLite database, else ./driftline-data/lake-<host>-<port>-<database>.",
    )
    lake_enabled: bool = Field(
        True, description="Seal closed hours into the lake and read analytics through it."
    )
    lake_seal_interval_s: float = Field(300.0, gt=0, description="Seconds between seal runs.")
    lake_seal_delay_s: float = Field(
        300.0, ge=0, description="An hour is sealed this many seconds after it ends."
    )
    lake_late_s: float = Field(
        172_800.0,
        ge=0,
        description="Sealed hours that ended within this many seconds are re-checked for late "
        "spans and re-sealed when their calls changed.",
    )

    egress_allow: str = Field(
        "",
        description="Where alert receivers (and the dashboard's Capacity page) may connect "
        "besides public addresses: comma list of networks (`10.0.0.0/8`), address:port "
        "(`127.0.0.1:9099`) and host[:port] (`hooks.internal:8443`). Checked on the resolved "
        "address at connect time; default: public addresses only.",
    )

    @field_validator("egress_allow")
    @classmethod
    def _egress_allow_parses(cls, v: str) -> str:
        from collector.egress import EgressPolicy

        EgressPolicy.parse(v)  # ValueError names the entry
        return v

    @model_validator(mode="before")
    @classmethod
    def _default_spool_dir(cls, data: Any) -> Any:
        # a spool holds requests for one store: its default follows the database (as the lake's)
        if isinstance(data, dict) and data.get("spool_dir") in (None, ""):  # unset or empty
            url = data.get("database_url") or DEFAULT_DATABASE_URL
            return {**data, "spool_dir": Path(store_sidecar(str(url), "spool"))}
        return data

    @field_validator("database_url")
    @classmethod
    def _known_dialect(cls, v: str) -> str:
        if not (v.startswith("sqlite") or v.startswith("postgresql")):
            raise ValueError("must start with sqlite:// or postgresql+psycopg://")
        return v

    @model_validator(mode="after")
    def _engine_maps_name_scraped_urls(self) -> Settings:
        scraped = set(self.engine_metrics_urls)
        for name, mapping in (
            ("engine_tenants", self.engine_tenants),
            ("engine_gpu_cost_per_hour", self.engine_gpu_cost_per_hour),
        ):
            unknown = sorted(set(mapping) - scraped)
            if unknown:
                raise ValueError(
                    f"{ENV_PREFIX}{name.upper()}: {', '.join(unknown)} not in "
                    f"{ENV_PREFIX}ENGINE_METRICS_URLS"
                )
        for url, tenant in self.engine_tenants.items():
            if not 1 <= len(tenant) <= 64:
                raise ValueError(f"{ENV_PREFIX}ENGINE_TENANTS: tenant of {url} must be 1..64 chars")
        for url, usd in self.engine_gpu_cost_per_hour.items():
            if not usd >= 0:
                raise ValueError(f"{ENV_PREFIX}ENGINE_GPU_COST_PER_HOUR: {url} must be >= 0 USD")
        return self

    @field_validator("prices")
    @classmethod
    def _prices_exists(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_file():
            raise ValueError(f"price file {v} does not exist")
        return v


def load_settings(**overrides: Any) -> Settings:
    """Build :class:`Settings` from explicit overrides, then the environment, then defaults.

    Raises:
        ConfigError: a value is invalid; the message names the ``DRIFTLINE_*`` variable.
    """
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError) -> str:
    """Render a pydantic ValidationError as ``DRIFTLINE_FIELD: message`` lines."""
    lines = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "?"
        lines.append(f"{ENV_PREFIX}{field.upper()}: {err['msg']} (got {err.get('input')!r})")
    return "invalid configuration: " + "; ".join(lines)


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
