from tests.daemon._helpers import home

__all__ = ["home"]
