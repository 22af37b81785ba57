"""Read models: projections of the ledger into SQL tables, updated exactly once, rebuildable."""
