"""Our own instructions for the LLM loop check (the JSON field names are the protocol)."""

from __future__ import annotations

LOOP_CHECK_INSTRUCTION = """\
You review the recent work of a coding agent and judge whether it is stuck: repeating \
itself without getting anywhere. You only judge; you do not continue the work.

Call it stuck only when both hold:
1. Over at least five consecutive agent turns (tool calls or replies) the agent does the \
same thing again: the same tool with the same arguments, the same pair of steps in \
alternation, or the same plan or question restated without acting on it.
2. Those repetitions change nothing: the same results, the same errors, no new \
information, no file or state that moves the task forward.

It is progress, not a loop, when:
- one tool is used on different targets (other files, paths, queries, line ranges);
- a file is edited step by step in different places or with different text;
- a build or test is run again after the code changed in between;
- a failed step is retried with different arguments or another approach;
- the original request asks for many similar steps ("every file", "each function").

Compare arguments and results, not tool names. When unsure, give a low confidence.\
"""

LOOP_CHECK_TASK = (
    "Judge the conversation above: is the agent stuck repeating itself without progress, "
    "given the original request when it is shown? Answer in the JSON format you were given: "
    "your reasoning, and your confidence from 0.0 (clearly making progress) to 1.0 (clearly stuck)."
)

LOOP_CHECK_SCHEMA = {
    "type": "object",
    "properties": {
        "unproductive_state_analysis": {
            "type": "string",
            "description": "Why the agent is or is not stuck, citing the repeated actions.",
        },
        "unproductive_state_confidence": {
            "type": "number",
            "description": "0.0 to 1.0: how sure you are that the agent is stuck.",
        },
    },
    "required": ["unproductive_state_analysis", "unproductive_state_confidence"],
}
