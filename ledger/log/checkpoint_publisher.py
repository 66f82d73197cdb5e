"""Publishes the log's head as a signed checkpoint to its witness files: every ``interval``
seconds when the head has moved, on demand (an inclusion proof for an event newer than the last
checkpoint), and once more at shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlalchemy import Connection

from ledger.log.checkpoints import Checkpoint, sign_head
from ledger.log.epoch import read_epoch_sync
from ledger.log.store import LedgerStore
from ledger.log.transaction import ChainHead, read_head
from ledger.log.witness import append_checkpoint, latest_in

log = logging.getLogger(__name__)


class CheckpointMetrics(Protocol):
    def observe_checkpoint(self, seq: int) -> None: ...

    def count_checkpoint_failure(self) -> None: ...


def _head_and_epoch(conn: Connection) -> tuple[ChainHead, str]:
    return read_head(conn), read_epoch_sync(conn) or ""


class CheckpointPublisher:
    def __init__(
        self,
        store: LedgerStore,
        key: Ed25519PrivateKey,
        witness_files: Sequence[Path],
        *,
        interval_s: float,
        metrics: CheckpointMetrics | None = None,
    ) -> None:
        self._store = store
        self._key = key
        self._files = list(witness_files)
        self._interval = interval_s
        self._metrics = metrics
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.latest: Checkpoint | None = None

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self._key.public_key()

    async def start(self) -> None:
        # The last checkpoint published before this start: the route answers with it at once,
        # and an unmoved head is not published again.
        self.latest = latest_in(self._files[0]) if self._files else None
        self._task = asyncio.create_task(self._loop(), name="ledger-checkpoints")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(Exception):  # the store may already be unreadable
            await self.publish()

    async def _loop(self) -> None:
        while True:
            try:
                await self.publish()
            except Exception:
                log.exception("publishing a checkpoint failed")
                if self._metrics is not None:
                    self._metrics.count_checkpoint_failure()
            await asyncio.sleep(self._interval)

    async def publish(self) -> Checkpoint | None:
        """Sign the current head and append it to every witness file, unless the latest
        checkpoint already names it. None while the log is empty."""
        async with self._lock:
            head, epoch = await self._store.read_sync(_head_and_epoch)
            latest = self.latest
            if head.seq == 0 or (latest is not None and latest.seq == head.seq):
                return latest
            checkpoint = sign_head(
                self._key,
                seq=head.seq,
                chain_hash=head.hash,
                log_epoch=epoch,
                at=datetime.now(UTC),
            )
            written = 0
            for path in self._files:
                try:
                    await asyncio.to_thread(append_checkpoint, path, checkpoint)
                    written += 1
                except OSError as exc:
                    # One witness out of reach (a full or missing second disk) does not stop
                    # the others; the failure is counted and logged.
                    log.error("checkpoint seq %d not written to %s: %s", head.seq, path, exc)
                    if self._metrics is not None:
                        self._metrics.count_checkpoint_failure()
            if written:
                self.latest = checkpoint
                if self._metrics is not None:
                    self._metrics.observe_checkpoint(head.seq)
            return self.latest
