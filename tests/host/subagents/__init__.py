"""Subagent sessions as the host starts them (actors/host/subagents.py with the invoke_agent tool)."""
