"""Tests of the host layer (actors.host)."""
