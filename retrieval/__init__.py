"""How a memory is found for an agent: `retrieval.search.MemorySearch` is the one entry point."""
