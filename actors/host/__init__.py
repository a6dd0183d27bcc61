"""The host layer: everything that opens a session.

Reading settings and policies, choosing the model, gathering context, resuming a
recorded history, expanding ``@``-references, running the user's own tool calls and
starting subagent sessions. Front ends (``actors.frontends``) call it; it calls the
actors and ``actors.common``, never a front end.
"""
