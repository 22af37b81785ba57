"""Pydantic request and response models: the HTTP edge only, never stored."""
