"""agentbus's actors: one module (or package) per actor, plus the wiring and the CLI.

Actors never import each other; they share only the message types of ``bus``. Only the
wiring (``actors.host.runtime``) and the entry points (``actors.frontends``) see several actors.
"""
