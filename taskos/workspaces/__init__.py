"""The person's files in a session's workspace (feature T9): taking them in (intake), the
records and listing of who wrote what (files), and the web's views of them."""
