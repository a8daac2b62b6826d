"""One module per recorded GPU experiment; each exposes `record() -> dict` (see accumlab.record)."""
