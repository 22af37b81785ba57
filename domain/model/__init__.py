"""Pure aggregates and their events: no SQL, no HTTP, no pydantic."""
