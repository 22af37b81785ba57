"""Finding memories for agents: lexical and vector search, hybrid ranking, budgets, cache."""
