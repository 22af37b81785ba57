"""Embeddings for hybrid retrieval: embedders, the service around them, vector queries."""
