"""The ledger's PostgreSQL persistence."""
