"""Read models built from the ledger's events."""
