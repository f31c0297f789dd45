"""The debug drawer: one panel per concern, rendered from stored SessionEvents (feature W3)."""
