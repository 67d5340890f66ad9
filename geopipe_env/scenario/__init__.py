"""Layer 3: scenarios: their frozen types, the file format's declarations, the loader, the JSON Schema and the
bundled real data."""
