"""The model gateway: retries, the live backend against the fake server, recording."""
