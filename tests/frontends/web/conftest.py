from tests.frontends.daemon._helpers import home

__all__ = ["home"]
