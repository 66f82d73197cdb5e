"""The ledger as NeMo Gym's capture ledger: a lineage-store plug-in that runs inside Gym's
model-server process (``token_id_capture.lineage_store: "ledger.gym_plugin:LedgerCaptureLedger"``).

Importing this package needs only what Gym's own environment has (nemo_gym, httpx); it never
imports the ledger's server stack (sqlalchemy, the FastAPI app, the store)."""

from ledger.gym_plugin.capture_ledger import LedgerCaptureLedger, RolloutRetiredError

__all__ = ["LedgerCaptureLedger", "RolloutRetiredError"]
