"""The debug drawer: one panel per concern, rendered from stored SessionEvents (SPEC W3)."""
