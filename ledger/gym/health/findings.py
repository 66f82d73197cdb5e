"""A finding, and the subject it is about."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Finding:
    check: str
    subject: dict[str, Any]
    detail: dict[str, Any]
    locator: dict[str, Any] | None = None

    def line(self) -> dict[str, Any]:
        """As ``rollout_verdicts.jsonl`` writes it: no subject, no null locator."""
        if self.locator is None:
            return {"check": self.check, "detail": self.detail}
        return {"check": self.check, "locator": self.locator, "detail": self.detail}

    def public(self) -> dict[str, Any]:
        """As the API answers it: the subject too."""
        return {"check": self.check, "subject": self.subject, **self.line()}


def rollout_subject(task_index: Any, rollout_index: Any) -> dict[str, Any]:
    return {"_ng_task_index": task_index, "_ng_rollout_index": rollout_index}


def task_subject(task_index: Any) -> dict[str, Any]:
    return {"_ng_task_index": task_index}
