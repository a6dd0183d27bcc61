"""The daemon's native protocol: what clients send on the socket and what they get back.

One JSON object per line, encoded by the codec like every other message. A client sends
``Hello`` first; the daemon answers ``Welcome`` (or a fatal ``ProtocolError``). Every
request carries a ``request_id`` chosen by the client and gets exactly one reply naming
it: the request's own reply type, ``RequestDone``, or ``ProtocolError``. Session events
arrive as envelopes (``{"v", "seq", "session_id", "sender", "to", "msg"}``, the
recording's line format) after a ``Subscribe``; notices (``ObserverLagged``,
``CaughtUp``, ``SubscriptionEnded``, ``DaemonStopping``) have no request id. A client
that runs a session's shell commands (``CreateSession.terminals``) also gets the
session's ``RunInTerminal`` and ``KillTerminal`` as they are, and answers with
``TerminalOutput`` and ``TerminalExited`` frames, which get no reply (one naming no
command it runs is ``invalid``). The messages defined here never travel on the bus; ``session_id`` is empty where a request names no session.
"""

from __future__ import annotations

import attrs

from ._common import JsonValue, frozen_json, json_tuple, shared_methods
from .kinds import McpServerState, ProtocolErrorCode, SessionState
from .tools import CompletedCall

PROTOCOL_VERSION = 1
"""Version of the native protocol; ``Hello.protocol`` must equal it."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class SessionSummary:
    """One session as ``ListSessions`` and ``SessionReady`` describe it (a value)."""

    session_id: str
    state: SessionState
    """``running`` (its actors run in the daemon), ``dormant`` (the daemon will resume it
    from its recording when a client touches it) or ``recorded`` (a recording of this
    workspace that the daemon never ran; ``LoadSession`` resumes it); on a cluster,
    ``interrupted``: its node went away and no node that serves its workspace has taken
    it over yet (one that joins will)."""
    workspace: str = ""
    model: str = ""
    approval_mode: str = ""
    title: str = ""
    """The first prompt, shortened."""
    last_updated: str = ""
    busy: bool = False
    """A turn is running."""
    pending_approvals: tuple[str, ...] = ()
    """Correlation ids of approvals waiting for an answer."""
    next_seq: int = 0
    """The sequence number the session's next message will get (0: not running)."""
    clients: int = 0
    """Connections subscribed to it."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ConnectionSummary:
    """One client connection (in ``DaemonInfo``)."""

    address: str
    client: str
    sessions: tuple[str, ...] = ()
    queued_frames: int = 0
    """Frames waiting in its bounded send buffer."""
    lagged: int = 0
    """Times one of its subscriptions fell behind and was resynchronised."""
    stalled: bool = False
    """Its send buffer is full (the client does not read)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class McpToolSummary:
    """One tool of an MCP server (in ``McpServerSummary``)."""

    name: str
    """Its registered name (``mcp_<server>_<tool>``), as the model sees it."""
    description: str = ""
    schema: JsonValue = frozen_json({})
    """Its input schema as declared to the model."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class McpPromptSummary:
    """One prompt of an MCP server (in ``McpServerSummary``)."""

    name: str
    """Its name on the server."""
    command: str
    """The slash command that runs it (``/<command> args``): the name with spaces as
    dashes, or ``<server>.<name>`` when a built-in command or another server's prompt
    has that name."""
    description: str = ""
    arguments: tuple[str, ...] = ()
    """Its arguments' names, in the server's order."""
    required: tuple[str, ...] = ()
    """The arguments it requires."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class McpResourceSummary:
    """One resource of an MCP server (in ``McpServerSummary``); ``@<server>:<uri>`` in
    a prompt reads it."""

    uri: str
    name: str = ""
    mime_type: str = ""
    description: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class McpServerSummary:
    """One MCP server of a session and its state (in ``McpServerList``)."""

    name: str
    state: McpServerState
    """``connected``, ``disconnected`` (it went away; its next use reconnects) or
    ``error`` (it could not be used at session start: ``error`` says why)."""
    error: str = ""
    description: str = ""
    """The server's ``description`` in settings."""
    tools: tuple[McpToolSummary, ...] = ()
    prompts: tuple[McpPromptSummary, ...] = ()
    resources: tuple[McpResourceSummary, ...] = ()


# -- client -> daemon ----------------------------------------------------------------------
@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class Hello:
    """First frame of a connection."""

    request_id: str
    protocol: int
    client: str = ""
    """A name for logs and ``DaemonInfo`` (``chat``, ``acp``...)."""
    token: str = ""
    """The daemon's token: required on its TCP listener (``daemon.token``), not on the
    Unix socket."""
    session_id: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ListSessions:
    """Request: the daemon's sessions, plus the recordings of ``workspace`` when given."""

    request_id: str
    workspace: str = ""
    session_id: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CreateSession:
    """Request: start a new session; answered by ``SessionReady``."""

    request_id: str
    workspace: str
    """Absolute path of the workspace root."""
    model: str = ""
    """Empty: ``$GEMINI_MODEL``, ``model.name`` from settings, else ``auto``."""
    approval_mode: str = ""
    """Empty: ``general.defaultApprovalMode`` from settings, else ``default``. A word of
    ``ApprovalMode``, kept ``str`` here so that the daemon refuses another as ``invalid``
    with the request's id (a decoding error has none to answer)."""
    session_id: str = ""
    """Empty: a fresh id."""
    fake_responses: str = ""
    """A Gemini CLI fake-responses file this session's model requests are served from
    (tests, demos); empty: the live model."""
    fake_chunk_delay_ms: int = 0
    """Pause between the streamed chunks of a fake response (benchmarks)."""
    auth_env: JsonValue = frozen_json(None)
    """The client's auth environment (``GEMINI_API_KEY``, ``GOOGLE_GEMINI_BASE_URL``...,
    names to values, unset ones left out): the session's model requests use these
    credentials, never written anywhere. None: the daemon's own environment."""
    mcp_servers: tuple[JsonValue, ...] = json_tuple()
    """The client's own MCP servers for the session (ACP ``mcpServers`` entries: stdio,
    ``http``, ``sse``), which the daemon starts beside those of the settings (a stdio
    one in the workspace, with the daemon's environment and the entry's ``env``); a
    malformed entry is ``invalid``. Kept in memory only, never written anywhere."""
    terminals: bool = False
    """This connection runs the session's shell commands in its client's terminals (an
    editor's ACP ``terminal/*``): the daemon sends it the session's ``RunInTerminal`` and
    ``KillTerminal`` as events, and it answers with ``TerminalOutput`` and
    ``TerminalExited`` frames (which get no reply). When it goes, a command it runs
    ends as failed and the daemon runs the next ones itself."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class LoadSession:
    """Request: make a session run (resumed from its recording when it does not);
    answered by ``SessionReady``. A running session is shared, not restarted."""

    session_id: str
    request_id: str
    fake_responses: str = ""
    """From now on, serve the session's model requests from this file (tests)."""
    fake_chunk_delay_ms: int = 0
    auth_env: JsonValue = frozen_json(None)
    """As ``CreateSession.auth_env``: when they make a complete auth configuration,
    the session's model requests use these credentials from now on."""
    mcp_servers: tuple[JsonValue, ...] = json_tuple()
    """As ``CreateSession.mcp_servers``, for a session this request starts (resumes);
    a running session keeps the servers it has (``SessionReady.resumed`` is false)."""
    terminals: bool = False
    """As ``CreateSession.terminals`` (also for a session already running: its next
    commands run in this connection's client's terminals)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class EndSession:
    """Request: close the session for every client (its running turn is cancelled first);
    the daemon forgets it (the recording stays)."""

    session_id: str
    request_id: str
    reason: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class Subscribe:
    """Request: send this session's events, from ``from_seq`` on (caught up from the
    recording, then live, with no gap and no duplicate); ``None``: from now on. Loads the
    session when it does not run."""

    session_id: str
    request_id: str
    from_seq: int | None = None
    full: bool = False
    """Every message of the session; by default internal traffic (model requests and
    chunks, tool runs, loop checks, hook runs) is left out."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class Unsubscribe:
    """Request: stop sending this session's events."""

    session_id: str
    request_id: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class Prompt:
    """Request: submit a prompt. Unless ``parts`` are given, the daemon (which holds the
    session's MCP servers) runs ``text`` as an MCP prompt's command (``/<prompt> args``)
    or expands its ``@`` references (files, ``@server:uri`` resources); one that cannot
    be carried out, and ``/<prompt> help``, is answered ``invalid`` in one line.
    Answered by ``PromptAccepted``."""

    session_id: str
    request_id: str
    text: str
    parts: tuple[JsonValue, ...] = json_tuple()
    """The prompt's parts as they are: ``text`` is then only shown."""
    attachments: tuple[JsonValue, ...] = json_tuple()
    """Parts that follow those of ``text``'s expansion (images, embedded context an
    editor sent beside the text)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class Cancel:
    """Request: cancel the running turn, or the tool call of ``tool_request_id``
    (a ``CallTool``). The acknowledgement follows as an event."""

    session_id: str
    request_id: str
    tool_request_id: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class Answer:
    """Request: answer an approval (``outcome`` is a ``ToolConfirmationOutcome``:
    ``proceed_once``, ``proceed_always``, ``cancel``...). The first answer wins; the
    ``ApprovalSettled`` event says whose it was."""

    session_id: str
    request_id: str
    correlation_id: str
    outcome: str
    """A word of ``ApprovalOutcome`` (``str`` here: the daemon refuses another as
    ``invalid``, answering the request)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class SetMode:
    """Request: change the approval mode (between turns)."""

    session_id: str
    request_id: str
    approval_mode: str
    """A word of ``ApprovalMode`` (``str`` here: the daemon refuses another as
    ``invalid``, answering the request)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CallTool:
    """Request: run a tool as the user (``client_initiated``) through the session's
    scheduler; the result goes to this client only, as ``ToolCallResult``, and stays out
    of the model's history."""

    session_id: str
    request_id: str
    name: str
    args: JsonValue = frozen_json({})
    add_to_context: bool = False
    """Also add the result to the conversation (``AddContext``), so that the next
    prompt's model request carries it; only a call that ran is added."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ListMcpServers:
    """Request: a session's MCP servers, their state, tools, prompts and resources;
    answered by ``McpServerList``."""

    session_id: str
    request_id: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class DaemonStatus:
    """Request: what the daemon runs; answered by ``DaemonInfo``."""

    request_id: str
    session_id: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class StopDaemon:
    """Request: shut the daemon down (as SIGTERM does); answered by ``RequestDone``."""

    request_id: str
    session_id: str = ""


# -- daemon -> client ----------------------------------------------------------------------
@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class Welcome:
    """Reply to ``Hello``."""

    request_id: str
    protocol: int
    pid: int
    address: str
    """This connection's address: ``sender`` of what it sends, ``answered_by`` of its
    approval answers, ``requested_by`` of its cancels."""
    session_id: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class RequestDone:
    """Reply: the request was carried out (or, for commands, handed to the session)."""

    request_id: str
    session_id: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class SessionList:
    """Reply to ``ListSessions``."""

    request_id: str
    sessions: tuple[SessionSummary, ...] = ()
    session_id: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class SessionReady:
    """Reply to ``CreateSession`` and ``LoadSession``: the session runs."""

    session_id: str
    request_id: str
    summary: SessionSummary
    resumed: bool = False
    """It was started from its recording (history rebuilt)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class Subscribed:
    """Reply to ``Subscribe``: events from ``from_seq`` follow."""

    session_id: str
    request_id: str
    from_seq: int
    next_seq: int
    """The live point when the subscription began; events before it come from the
    recording."""
    pending_approvals: tuple[str, ...] = ()
    """Approvals waiting for an answer when the subscription began (correlation ids).
    Each one's ``ApprovalRequested`` reaches this client: first thing after this reply
    when it is older than ``from_seq``, otherwise in its place among the events."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class PromptAccepted:
    """Reply to ``Prompt``: handed to the session as ``SubmitPrompt(prompt_id)``."""

    session_id: str
    request_id: str
    prompt_id: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ToolCallResult:
    """Reply to ``CallTool``, to the requesting client only: the settled call."""

    session_id: str
    request_id: str
    call: CompletedCall
    added_to_context: bool = False
    """The result was added to the conversation (``CallTool.add_to_context``)."""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class McpServerList:
    """Reply to ``ListMcpServers``: the session's servers by name (none when it has
    none)."""

    session_id: str
    request_id: str
    servers: tuple[McpServerSummary, ...] = ()


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class DaemonInfo:
    """Reply to ``DaemonStatus``."""

    request_id: str
    pid: int
    socket: str
    started: str
    sessions: tuple[SessionSummary, ...] = ()
    connections: tuple[ConnectionSummary, ...] = ()
    session_id: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class CaughtUp:
    """Notice: a new subscription's events before ``next_seq`` (its live point) have
    been sent; what follows is live. A client showing a conversation as history knows
    here that it has all of it."""

    session_id: str
    next_seq: int


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class SubscriptionEnded:
    """Notice: no more events of this session will come (it closed)."""

    session_id: str
    reason: str


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class DaemonStopping:
    """Notice: the daemon shuts down; the connection closes next."""

    reason: str
    session_id: str = ""


@shared_methods
@attrs.frozen(kw_only=True, repr=False, eq=False)
class ProtocolError:
    """Reply or notice: a frame or request was refused. ``fatal``: the connection closes.

    ``code``: ``bad_frame`` (not UTF-8, not JSON, nested deeper than the stack, an
    integer too long to convert, a lone surrogate, not a known message or a field of the
    wrong type), ``frame_too_large``,
    ``hello_required``, ``bad_version``, ``bad_token``, ``not_a_request``,
    ``unknown_session``, ``not_yours`` (a session this connection did not open or
    subscribe), ``busy``, ``invalid`` (a bad value), ``too_many_errors``,
    ``auth_required`` (the session's model credentials are missing or do not fit its
    settings: a client exits as Gemini CLI does on an authentication error, 41),
    ``failed``.
    """

    request_id: str | None
    code: ProtocolErrorCode
    message: str
    fatal: bool = False
    session_id: str = ""
