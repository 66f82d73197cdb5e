"""One package per area of the ledger; each exports one Area value from its area module."""
