"""The ledger: `MemoryLedger` (ledger.py) and its command objects, the crypto-shredding mapper
and key store, and in `persistence/` all of its PostgreSQL code. Layout and design: docs/ledger.md.
"""
