"""memledger write side: aggregates, their events, commands and the crypto-shredding ledger."""
