"""The ledger: the eventsourcing application, its crypto-shredding mapper, key store and recorder."""
