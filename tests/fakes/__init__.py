"""Fakes for tests: a fake Gemini API server (real HTTP on loopback)."""
