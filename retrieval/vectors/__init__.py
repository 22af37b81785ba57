"""Vectors for hybrid retrieval: embedders, their service, vector reads and the matrix cache."""
