"""agentbus's actors: one module (or package) per actor, plus the wiring and the CLI.

Actors never import each other; they share only the message types of ``bus``. Only the
wiring (``actors.runtime``) and the entry points (``actors.cli``) see several actors.
"""
