"""Loop detector actor: tells the turn, before it shows an event, whether it loops."""

from ._actor import DOUBLE_CHECK_MODEL, LOOP_CHECK_MODEL, LoopDetectorActor, LoopWiring
from ._logic import LoopDetector, Verdict, parse_llm_answer

__all__ = ["DOUBLE_CHECK_MODEL", "LOOP_CHECK_MODEL", "LoopDetector", "LoopDetectorActor", "LoopWiring", "Verdict", "parse_llm_answer"]
