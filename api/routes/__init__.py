"""Routes, one module per resource of API_CONTRACT.md."""
