"""What the entry point does for a process of its own (issue #20, start-up and exit):

- importing trio finds libpthread without running ``ldconfig`` (``_pthread_lookup``), with
  the answer the real search gives and trio's thread names still set;
- a finished headless run leaves with ``os._exit`` after what an ordinary exit shows (the
  ``atexit`` functions, stdout and stderr flushed; ``_exit``), and takes the ordinary
  exit whenever it would do more: a thread it would wait for, a stream it cannot flush,
  ``-X dev``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors.frontends._pthread_lookup import GLIBC_PTHREAD, uses_glibc

ROOT = Path(__file__).resolve().parents[2]
HI = ROOT / "scenarios" / "bench" / "hi.responses"


def python(code: str, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


needs_glibc = pytest.mark.skipif(not uses_glibc(), reason="the lookup is answered on Linux with glibc only")

IMPORT_TRIO = """
import subprocess, sys
started = []
_init = subprocess.Popen.__init__
def init(self, args, *rest, **kwargs):
    started.append(args)
    _init(self, args, *rest, **kwargs)
subprocess.Popen.__init__ = init
if sys.argv[1:] == ["answered"]:
    from actors.frontends import answer_pthread_lookup
    assert answer_pthread_lookup()
import trio
from trio._core._thread_cache import set_os_thread_name
print(bool(started), set_os_thread_name is not None)
"""


@needs_glibc
def test_importing_trio_runs_no_ldconfig_and_still_names_threads() -> None:
    searched = python(IMPORT_TRIO.replace("sys.argv[1:]", '["searched"]'))
    answered = python(IMPORT_TRIO.replace("sys.argv[1:]", '["answered"]'))
    assert searched.stdout.split() == ["True", "True"], searched.stderr  # ldconfig ran
    assert answered.stdout.split() == ["False", "True"], answered.stderr


@needs_glibc
def test_the_answer_is_the_one_the_search_gives() -> None:
    code = (
        "import ctypes.util\n"
        "real = ctypes.util.find_library('pthread'), ctypes.util.find_library('c')\n"
        "from actors.frontends import answer_pthread_lookup\n"
        "answer_pthread_lookup()\n"
        "print(real, (ctypes.util.find_library('pthread'), ctypes.util.find_library('c')))\n"
    )
    done = python(code)
    real, answered = done.stdout.strip().split(") (")
    if "None" in real.split(",")[0]:
        pytest.skip("this machine's search finds no libpthread (no ldconfig cache)")
    assert real.split(",")[0].strip("('") == GLIBC_PTHREAD
    assert f"{real})" == f"({answered}", done.stderr


EXIT = """
import atexit, os, sys, threading
_exit = os._exit
def fast(status):
    sys.__stderr__.write(f"os._exit({status})\\n")
    sys.__stderr__.flush()
    _exit(status)
os._exit = fast
atexit.register(lambda: sys.__stderr__.write("atexit ran\\n"))
from actors.frontends._exit import exit_without_teardown
case = sys.argv[1]
if case == "thread":
    release = threading.Event()
    threading.Thread(target=release.wait).start()
if case == "daemon thread":
    threading.Thread(target=threading.Event().wait, daemon=True).start()
if case == "closed stdout":
    class Closed:
        def write(self, text): return len(text)
        def flush(self): raise BrokenPipeError(32, "Broken pipe")
    sys.stdout = Closed()
sys.stdout.write("buffered")
exit_without_teardown(3)
sys.__stderr__.write("ordinary exit\\n")
if case == "thread":
    release.set()
"""


@pytest.mark.parametrize(
    ("case", "options", "fast"),
    [
        ("plain", (), True),
        ("daemon thread", (), True),
        ("thread", (), False),
        ("closed stdout", (), False),
        ("plain", ("-X", "dev"), False),
        ("plain", ("-W", "error"), False),
    ],
)
def test_leaving_without_teardown_only_when_nothing_else_is_due(case: str, options: tuple[str, ...], fast: bool) -> None:
    done = python(EXIT.replace("sys.argv[1]", repr(case)), *options)
    lines = done.stderr.splitlines()
    if fast:
        assert lines == ["atexit ran", "os._exit(3)"], done.stderr
        assert (done.returncode, done.stdout) == (3, "buffered")
    else:
        assert "os._exit(3)" not in lines and "ordinary exit" in lines, done.stderr
        assert lines.count("atexit ran") == 1, done.stderr  # never twice
        assert done.returncode == (120 if case == "closed stdout" else 0), done.stderr


def test_a_headless_run_of_its_own_leaves_without_teardown(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        "_exit = os._exit\n"
        "def fast(status):\n"
        "    os.write(2, b'os._exit(%d)' % status)\n"
        "    _exit(status)\n"
        "os._exit = fast\n"
        f"sys.argv[1:] = ['-p', 'hi', '-m', 'gemini-2.5-flash', '--fake-responses', {str(HI)!r}]\n"
        "from actors.frontends import main\n"
        "sys.exit(main())\n"
    )
    data = tmp_path / "data"
    env = {"HOME": str(tmp_path), "GEMINI_CLI_HOME": str(tmp_path), "AGENTBUS_DATA_DIR": str(data), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = python(code, cwd=tmp_path, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "Hello! How can I help you today?\n", "os._exit(0)")
    # What the ordinary exit would have left: the recording whole, the atexit functions'
    # work (the compiled-methods cache written).
    (recording,) = data.rglob("*.jsonl")
    assert '"type":"SessionClosed"' in recording.read_text().splitlines()[-1]
    assert list((tmp_path / "cache" / "agentbus").glob("attrs-methods-*"))
    # Called with arguments (tests, embedding): the caller's process, the ordinary return.
    embedded = code.replace("main())", "main(sys.argv[1:]))")
    done = python(embedded, cwd=tmp_path, env=env)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


FSYNCS = """
import sys, threading
from actors.recording import FileSink
loop_thread = threading.get_ident()
where = []
_fsync = FileSink.fsync
def fsync(self):
    where.append("loop" if threading.get_ident() == loop_thread else "thread")
    _fsync(self)
FileSink.fsync = fsync
from actors.frontends import main
status = main(sys.argv[1:])
print()
print(status, "genai" if "google.genai" in sys.modules else "no-genai", *where)
"""


@pytest.mark.parametrize(
    ("command", "live"),
    [
        (["-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", str(HI), "-o", "json"], False),
        # The live backend: the google-genai SDK over HTTP to the fake Gemini server.
        (["-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", str(HI), "-o", "json"], True),
        (["tool", "read_file", "--args", '{"file_path": "notes.txt"}'], False),
    ],
    ids=["headless", "headless, live backend", "tool"],
)
def test_a_process_serving_one_session_fsyncs_its_recording_on_the_loop(
    tmp_path: Path, command: list[str], live: bool
) -> None:
    # A daemon's sessions fsync in a worker thread (tests/recorder/test_recorder.py): its
    # loop serves the others meanwhile. A run of its own has nothing else to serve.
    (tmp_path / "notes.txt").write_text("a note\n")
    home = tmp_path / "home"
    env = {"HOME": str(home), "GEMINI_CLI_HOME": str(home), "AGENTBUS_DATA_DIR": str(home / "data"), "GEMINI_API_KEY": "k"}
    if live:
        env["AGENTBUS_FAKE_RESPONSES_OVER_HTTP"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", FSYNCS, *command],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    status, sdk, *where = done.stdout.splitlines()[-1].split()  # after the run's own output
    assert status == "0", (done.stdout, done.stderr)
    assert sdk == ("genai" if live else "no-genai")
    assert len(where) >= 2 and set(where) == {"loop"}, where  # the meta line's, the close's...
    recordings = list((home / "data").rglob("*.jsonl"))
    assert len(recordings) == 1 and '"SessionClosed"' in recordings[0].read_text()
