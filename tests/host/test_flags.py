"""The command line's approval modes are the bus's (``host/flags.py`` spells them out so
that ``agentbus acp`` parses its flags before the bus loads)."""

from typing import get_args

from actors.host.flags import APPROVAL_MODES
from bus.messages import ApprovalMode


def test_the_flags_offer_every_approval_mode_of_the_bus() -> None:
    assert APPROVAL_MODES == get_args(ApprovalMode)
