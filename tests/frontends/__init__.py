"""Tests of the front ends, one package each."""
