"""HTTP API, command line and wiring of memledger."""
