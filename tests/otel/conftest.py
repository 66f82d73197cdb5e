"""The Phoenix leg (test_phoenix.py) runs from scripts/test-phoenix, which builds its
environment first; the main suite leaves it out."""

from __future__ import annotations

import os

collect_ignore = [] if os.environ.get("LEDGER_PHOENIX_LEG") == "1" else ["test_phoenix.py"]
