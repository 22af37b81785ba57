"""The ledger: the eventsourcing application, crypto-shredding mapper, key store and recorder."""
