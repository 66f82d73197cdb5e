"""Gym's lineage-ledger wire contract (contract §3.3-§3.5, §3.8), pure and without I/O.

Two families of models live here:

* the ROWS a model server records (``CommittedRow``, ``FailureRow``): every column of a Gym
  ``<id>.lineage.jsonl`` line, strictly typed, unknown keys refused;
* Gym's manifest WIRE MODELS (``CallRecord``, ``ManifestFailure``, ``RolloutManifest``,
  ``RolloutRemoval``) and ``build_manifest``, which turns stored rows into a manifest exactly as
  Gym's ``_manifest_from_rows`` does: bad rows become failures, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    FailFast,
    Field,
    StringConstraints,
    Tag,
    ValidationError,
    model_validator,
)

from ledger.gym.ids import PRINTABLE_ID_PATTERN, ROLLOUT_ID_SCHEMA

CONTROL_ROUTE_PREFIX = "/training-token-capture/control"
MAX_LEDGER_BATCH = 4096
SCHEMA_VERSION = 2
DIGEST_VERSION = 2
EXTRAS_DIGEST_VERSION = 1

# Manifest failure reasons and the rest of the reason vocabulary (wire contract, §3.5).
LEDGER_ROW_MISSING_RESPONSE_ID = "ledger_row_missing_response_id"
# The literal was not retrievable from Gym; §3.4 says to expect this spelling.
LEDGER_ROW_MISSING_CHAIN_HASH = "ledger_row_missing_chain_hash"
# INFERRED (§3.10): not in any retrievable Gym code; a committed row that fails CallRecord
# validation for any other reason is reported with this reason instead of failing the route.
INVALID_MANIFEST_ROW = "invalid_manifest_row"
UNRESOLVED_PARENT = "unresolved_parent"
REQUEST_FINISHED_WITHOUT_STAGED_COORDINATES = "request_finished_without_staged_coordinates"
WORKER_RESPONSE_MISSING_COMMIT_COORDINATES = "worker_response_missing_commit_coordinates"
WORKER_CAPTURE_FAILED = "worker_capture_failed"
INVALID_WORKER_COMMIT_COORDINATES = "invalid_worker_commit_coordinates"

# Strings that are indexed in the database are bounded (a PostgreSQL btree entry must stay well
# under its ~2.7 kB limit); Gym's ids and hex digests are far shorter.
MAX_INDEXED_STRING = 1024

# Identifiers are visible ASCII, as capture ids are: they reach log lines (the discard WARNING
# names the staging key), where CR/LF would forge a line.
Identifier = Annotated[
    str, StringConstraints(strict=True, min_length=1, pattern=PRINTABLE_ID_PATTERN)
]
IndexedIdentifier = Annotated[
    str,
    StringConstraints(
        strict=True, min_length=1, max_length=MAX_INDEXED_STRING, pattern=PRINTABLE_ID_PATTERN
    ),
]
IndexedString = Annotated[str, StringConstraints(strict=True, max_length=MAX_INDEXED_STRING)]
# Bounded by what a database integer column holds.
NonNegativeInt = Annotated[int, Field(strict=True, ge=0, le=2**63 - 1)]
DigestHex = Annotated[str, StringConstraints(strict=True, pattern=r"^[0-9a-f]{64}$")]
FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]

# Every column of a committed-call row, in Gym's order (§3.3). The first five are the
# lineage-only columns; the rest are the custody columns added by external staging.
LINEAGE_COLUMNS = ("model_call_id", "fingerprint", "context_len", "context_digest", "digest")
CUSTODY_COLUMNS = (
    "parent_call_id",
    "staging_key",
    "weight_version",
    "prev_len",
    "delta_len",
    "cum_len",
    "staging_digest",
    "extras_digest",
    "mode",
    "admitted_at",
    "staging_chain",
    "chain_hash",
    "cumulative_hash",
    "response_id",
    "output_fingerprint",
    "continuation_fingerprint",
    "fingerprint_version",
)
ROW_COLUMNS = LINEAGE_COLUMNS + CUSTODY_COLUMNS
FAILURE_COLUMNS = ("failure_reason", "model_call_id")
# Columns the database indexes or keeps in bounded columns (see MAX_INDEXED_STRING).
INDEXED_COLUMNS = (
    "model_call_id",
    "staging_key",
    "fingerprint",
    "parent_call_id",
    "chain_hash",
    "response_id",
)

_WIRE = ConfigDict(extra="forbid", allow_inf_nan=False)


class CommittedRow(BaseModel):
    """One committed model call as a model server records it.

    Every column is required except ``chain_hash``, ``cumulative_hash`` and ``response_id``,
    which rows of an older Gym model server lack: such a row is recorded as it came (the missing
    keys stay missing) and the manifest reports it as a failure, as Gym's reader does.
    Types are strict (no coercion), lengths non-negative, floats finite. Cross-field rules
    (root/child, cum_len arithmetic, digest formats) are NOT enforced here: Gym records such a
    row and its manifest reports it as a failure, so the ledger does the same.
    """

    model_config = _WIRE

    model_call_id: IndexedIdentifier
    fingerprint: IndexedString | None
    context_len: NonNegativeInt
    context_digest: Annotated[str, Field(strict=True)] | None
    digest: Annotated[str, Field(strict=True)] | None
    parent_call_id: IndexedIdentifier | None
    staging_key: IndexedIdentifier
    weight_version: NonNegativeInt
    prev_len: NonNegativeInt
    delta_len: NonNegativeInt
    cum_len: NonNegativeInt
    staging_digest: Annotated[str, Field(strict=True)] | None
    extras_digest: Annotated[str, Field(strict=True)] | None
    mode: Annotated[str, Field(strict=True)]
    admitted_at: FiniteFloat | None
    staging_chain: Annotated[list[Identifier], FailFast()]
    chain_hash: IndexedString | None = None
    cumulative_hash: Annotated[str, Field(strict=True)] | None = None
    response_id: IndexedString | None = None
    output_fingerprint: Annotated[str, Field(strict=True)] | None
    continuation_fingerprint: Annotated[str, Field(strict=True)] | None
    fingerprint_version: NonNegativeInt | None


class FailureRow(BaseModel):
    """Exactly ``{"failure_reason": <reason>, "model_call_id": <id>}``."""

    model_config = _WIRE

    failure_reason: IndexedIdentifier
    model_call_id: IndexedIdentifier


def _row_kind(value: Any) -> str:
    if isinstance(value, Mapping) and "failure_reason" in value:
        return "failure"
    return "committed"


LedgerRowBody = Annotated[
    Annotated[CommittedRow, Tag("committed")] | Annotated[FailureRow, Tag("failure")],
    Discriminator(_row_kind),
]
"""A request body: a failure row when it has ``failure_reason``, else a committed row."""


# Columns an older Gym model server's rows may lack (recorded without them).
OPTIONAL_ROW_COLUMNS = ("chain_hash", "cumulative_hash", "response_id")


def row_dict(row: CommittedRow | FailureRow) -> dict[str, Any]:
    """The row as Gym writes it to ``<id>.lineage.jsonl``: every column it came with, nulls
    kept; a column it lacked stays absent, so the mirror and ``ledger import`` see it as sent."""
    return row.model_dump(mode="json", exclude_unset=True)


def is_failure_row(row: Mapping[str, Any]) -> bool:
    return "failure_reason" in row


def check_stored_row(row: Mapping[str, Any]) -> None:
    """The loose shape every stored row has (imported Gym ledgers may predate custody columns).

    Raises ``ValueError`` naming what is wrong.
    """
    if is_failure_row(row):
        FailureRow.model_validate(dict(row))
        return
    unknown = sorted(set(row) - set(ROW_COLUMNS))
    if unknown:
        raise ValueError(f"unknown ledger row column(s): {', '.join(unknown)}")
    model_call_id = row.get("model_call_id")
    if not isinstance(model_call_id, str) or not model_call_id:
        raise ValueError("a ledger row needs a non-empty string model_call_id")
    for name in INDEXED_COLUMNS:
        value = row.get(name)
        if isinstance(value, str) and len(value) > MAX_INDEXED_STRING:
            raise ValueError(f"{name} is longer than {MAX_INDEXED_STRING} characters")


def staging_key_of(row: Mapping[str, Any]) -> str | None:
    key = row.get("staging_key")
    return key if isinstance(key, str) and key else None


# --- Gym's manifest wire models (§3.5) ---------------------------------------------------


class CallRecord(BaseModel):
    """One manifest record. Field order is the wire order of Gym's reply."""

    model_config = _WIRE

    schema_version: Literal[2] = 2
    digest_version: Literal[2] = 2
    extras_digest_version: Literal[1] = 1
    model_call_id: Identifier
    parent_call_id: Identifier | None = None
    prev_len: NonNegativeInt
    delta_len: NonNegativeInt
    cum_len: NonNegativeInt
    weight_version: NonNegativeInt
    digest: DigestHex
    extras_digest: DigestHex
    staging_key: Identifier
    mode: Literal["token_in", "text"] = "token_in"
    chain_hash: DigestHex
    cumulative_hash: DigestHex
    response_id: Identifier
    admitted_at: FiniteFloat | None = None
    # Gym 0.7.0 types both as 64-hex digests (the contract leaves the type open): a row whose
    # fingerprint is not one becomes an ``invalid_manifest_row`` failure, so every manifest the
    # ledger serves validates as Gym's RolloutManifest.
    output_fingerprint: DigestHex | None = None
    continuation_fingerprint: DigestHex | None = None
    fingerprint_version: NonNegativeInt = 0

    @model_validator(mode="after")
    def _lengths_and_lineage(self) -> CallRecord:
        if self.delta_len < 1:
            raise ValueError("delta_len must be at least 1")
        if self.cum_len != self.prev_len + self.delta_len:
            raise ValueError("cum_len must equal prev_len + delta_len")
        if self.parent_call_id is None:
            if self.prev_len != 0 or self.mode != "text":
                raise ValueError("a root record has prev_len 0 and mode 'text'")
        elif self.prev_len <= 0 or self.mode != "token_in":
            raise ValueError("a child record has prev_len > 0 and mode 'token_in'")
        return self


class ManifestFailure(BaseModel):
    model_config = _WIRE

    schema_version: Literal[2] = 2
    model_call_id: Identifier
    reason: Identifier


class RolloutManifest(BaseModel):
    model_config = _WIRE

    schema_version: Literal[2] = 2
    rollout_id: Identifier
    records: list[CallRecord] = Field(default_factory=list)
    failures: list[ManifestFailure] = Field(default_factory=list)


class RolloutRemoval(BaseModel):
    """The reply of retire/delete. The server sends exactly ``removed`` and ``absent``; a
    reader accepts ``schema_version`` only if it is 2 (Gym's client does the same)."""

    model_config = _WIRE

    schema_version: Literal[2] | None = Field(default=None, exclude=True)
    removed: list[Identifier] = Field(default_factory=list)
    absent: list[Identifier] = Field(default_factory=list)


class LedgerBatchRequest(BaseModel):
    """The body of retire/delete: 1..4096 ids and nothing else (bad shapes are 422; an id
    outside Gym's charset is a 400, from ``validate_rollout_ids``: the charset is documented,
    not validated here)."""

    model_config = ConfigDict(extra="forbid")

    rollout_ids: Annotated[
        list[Annotated[str, Field(strict=True, json_schema_extra=ROLLOUT_ID_SCHEMA)]],
        Field(min_length=1, max_length=MAX_LEDGER_BATCH),
        FailFast(),
    ]


# --- Manifest construction (§3.4) --------------------------------------------------------


def _blank_to_none(value: Any) -> Any:
    return None if value == "" else value


def _call_record_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """Rebuild CallRecord fields from a row losslessly (``digest`` comes from staging_digest)."""
    fields: dict[str, Any] = {}
    for name in (
        "model_call_id",
        "parent_call_id",
        "prev_len",
        "delta_len",
        "cum_len",
        "weight_version",
        "extras_digest",
        "staging_key",
        "mode",
        "chain_hash",
        "cumulative_hash",
        "response_id",
        "admitted_at",
    ):
        if name in row:
            fields[name] = row[name]
    if "staging_digest" in row:
        fields["digest"] = row["staging_digest"]
    for name in ("output_fingerprint", "continuation_fingerprint"):
        fields[name] = _blank_to_none(row.get(name))
    version = row.get("fingerprint_version")
    fields["fingerprint_version"] = 0 if version is None else version
    return fields


def manifest_entry(row: Mapping[str, Any]) -> CallRecord | ManifestFailure | None:
    """What one stored row contributes to the manifest; ``None`` if it is ignored."""
    model_call_id = row.get("model_call_id")
    if is_failure_row(row):
        try:
            return ManifestFailure(model_call_id=model_call_id, reason=row["failure_reason"])
        except ValidationError:
            return None  # unreachable for rows the ledger accepted; never fail the route
    if staging_key_of(row) is None:
        return None  # a lineage-only row (no custody columns): not part of the manifest
    if not isinstance(model_call_id, str) or not model_call_id:
        return None
    if not row.get("response_id"):
        return ManifestFailure(model_call_id=model_call_id, reason=LEDGER_ROW_MISSING_RESPONSE_ID)
    if not row.get("chain_hash") or not row.get("cumulative_hash"):
        return ManifestFailure(model_call_id=model_call_id, reason=LEDGER_ROW_MISSING_CHAIN_HASH)
    try:
        return CallRecord.model_validate(_call_record_fields(row))
    except ValidationError:
        return ManifestFailure(model_call_id=model_call_id, reason=INVALID_MANIFEST_ROW)


def build_manifest(rollout_id: str, rows: Iterable[Mapping[str, Any]]) -> RolloutManifest:
    """Rows in ledger order → Gym's token-free manifest. Never raises on a bad row."""
    records: list[CallRecord] = []
    failures: list[ManifestFailure] = []
    for row in rows:
        entry = manifest_entry(row)
        if isinstance(entry, CallRecord):
            records.append(entry)
        elif isinstance(entry, ManifestFailure):
            failures.append(entry)
    return RolloutManifest(rollout_id=rollout_id, records=records, failures=failures)


def manifest_json(manifest: RolloutManifest) -> dict[str, Any]:
    """The manifest reply body: every field, in wire order, nulls kept."""
    return manifest.model_dump(mode="json")


def removal_json(removed: list[str], absent: list[str]) -> dict[str, list[str]]:
    """Exactly ``{"removed": [...], "absent": [...]}`` (Gym's client refuses extra keys)."""
    return {"removed": list(removed), "absent": list(absent)}
