"""``agentbus daemon --workers N``: the front starts an embedded nats-server (token
required) and N worker daemons, starts a killed worker again, and leaves nothing running
when it stops or is killed. Real processes: the command line, a real nats-server
(skipped without one, ``tests/cluster/conftest.py``)."""

from __future__ import annotations

import json
import os
import signal
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from actors.frontends.daemon import main
from actors.frontends.daemon.client import open_client
from actors.frontends.daemon.paths import DaemonPaths, lock_is_held, read_pid
from actors.recording import recording_path
from tests.cluster.conftest import binary_or_skip
from tests.frontends.daemon._helpers import client_of, events_until, text_response, write_responses
from tests.frontends.daemon._procs import agentbus, daemon_process, ends_within, env_for

BOUND_S = 30


@attrs.frozen
class Front:
    home: Path
    pid: int
    workers: dict[int, int]
    nats: int
    url: str
    token_file: Path

    @property
    def run(self) -> Path:
        return self.home / "run"

    @property
    def children(self) -> list[int]:
        return [*self.workers.values(), self.nats]


def processes_of(home: Path) -> list[int]:
    """Live processes started with ``home``'s runtime directory in their environment (a
    front, its workers, its nats-server); a zombie's environment is empty."""
    needle = f"AGENTBUS_RUNTIME_DIR={home / 'run'}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if any(v.startswith(needle) for v in (entry / "environ").read_bytes().split(b"\0")):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def parent_of(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1])


async def until(condition: object) -> None:
    """Until ``condition()`` holds (the caller bounds the wait)."""
    while not condition():  # type: ignore[operator]  # noqa: ASYNC110 - other processes' state: no event to wait on
        await trio.sleep(0.05)


async def worker_answers(home: Path, i: int) -> int:
    """The pid worker ``i`` gives on its own socket."""
    async with open_client(DaemonPaths(home / "run" / "nodes" / str(i)), client="test", start=False) as client:
        return (await client.status()).pid


@asynccontextmanager
async def front_of(home: Path, count: int) -> AsyncIterator[Front]:
    binary_or_skip()
    done = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon", "--workers", str(count), "--detach", timeout=BOUND_S))
    assert done.returncode == 0, done.stderr
    run = home / "run"
    front_pid = read_pid(DaemonPaths(run))
    try:
        assert front_pid is not None
        state = json.loads((run / "workers.json").read_text())
        workers = {i: read_pid(DaemonPaths(run / "nodes" / str(i))) for i in range(1, count + 1)}
        assert all(workers.values()), workers
        yield Front(home, front_pid, workers, state["nats_pid"], state["url"], Path(state["token_file"]))  # type: ignore[arg-type]
    finally:
        for pid in processes_of(home):  # a failed test leaves nothing running either
            os.kill(pid, signal.SIGKILL)


async def test_workers_start_behind_the_socket_with_a_private_token_and_stop_leaving_nothing(home: Path) -> None:
    from actors.cluster import Credentials, Unauthorized, open_link

    with trio.fail_after(BOUND_S):
        async with front_of(home, 2) as front:
            assert sorted(processes_of(home)) == sorted([front.pid, *front.children])
            assert all(parent_of(pid) == front.pid for pid in front.children)
            for i, pid in front.workers.items():
                assert await worker_answers(home, i) == pid
            token = front.token_file.read_text().strip()
            assert front.token_file.parent == front.run and stat.S_IMODE(front.token_file.stat().st_mode) == 0o600
            assert not any(token.encode() in cmdline(pid) for pid in front.children)  # ps shows command lines
            assert stat.S_IMODE((home / "data" / "cluster" / "nats").stat().st_mode) == 0o700
            with pytest.raises(Unauthorized):
                async with open_link(front.url):
                    pass
            async with open_link(front.url, Credentials(token=token)):
                pass
            status = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon", "status"))
            assert status.returncode == 0, status.stderr
            assert f"running, pid {front.pid}" in status.stdout
            for i, pid in front.workers.items():
                assert f"worker {i}: pid {pid}, running, 0 session(s)" in status.stdout
            stopped = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon", "stop"))
            assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
            # Stopped means its workers and nats-server are gone, not going.
            assert all(ends_within(pid, 0) for pid in front.children)
            assert ends_within(front.pid, BOUND_S)
            assert processes_of(home) == []
            assert not front.token_file.exists() and not lock_is_held(DaemonPaths(front.run))
            log = (front.run / "daemon.log").read_text()
            assert "stopping 2 worker(s), then the nats-server" in log and "workers and nats-server stopped" in log


def nats_pid(front: Front) -> int:
    return int(json.loads((front.run / "workers.json").read_text())["nats_pid"])


async def test_a_killed_worker_or_nats_server_is_started_again_and_a_killed_front_takes_everything_with_it(
    home: Path,
) -> None:
    from actors.cluster import Credentials, open_link

    with trio.fail_after(BOUND_S):
        async with front_of(home, 2) as front:
            killed = front.workers[1]
            os.kill(killed, signal.SIGKILL)
            worker = DaemonPaths(front.run / "nodes" / "1")
            await until(lambda: read_pid(worker) not in (None, killed) and lock_is_held(worker))
            again = read_pid(worker)
            assert again is not None and parent_of(again) == front.pid
            assert await worker_answers(home, 1) == again
            log = (front.run / "daemon.log").read_text()
            assert f"worker 1 (pid {killed}) was killed by SIGKILL; starting it again" in log
            # The nats-server: again on its port, with its token.
            os.kill(front.nats, signal.SIGKILL)
            await until(lambda: nats_pid(front) != front.nats)
            server = nats_pid(front)
            assert parent_of(server) == front.pid
            async with open_link(front.url, Credentials(token=front.token_file.read_text().strip())):
                pass
            log = (front.run / "daemon.log").read_text()
            assert f"nats-server (pid {front.nats}) was killed by SIGKILL; starting it again" in log
            os.kill(front.pid, signal.SIGKILL)
            for pid in (again, front.workers[2], server):
                assert ends_within(pid, BOUND_S), f"pid {pid} outlived its front"


async def test_a_worker_that_does_not_start_stops_the_front_with_its_last_log_line(home: Path) -> None:
    binary_or_skip()
    with trio.fail_after(BOUND_S):
        # A daemon already on worker 1's socket: worker 1 finds it and gives up.
        squatter = {**env_for(home), "AGENTBUS_RUNTIME_DIR": str(home / "run" / "nodes" / "1")}
        started = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon", "--detach", env=squatter))
        assert started.returncode == 0, started.stderr
        squatter_pid = read_pid(DaemonPaths(home / "run" / "nodes" / "1"))
        try:
            done = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon", "--workers", "2", timeout=BOUND_S))
            assert done.returncode == 1
            assert "worker 1 found a daemon running on" in done.stderr
            assert f"a daemon is already running (pid {squatter_pid})" in done.stderr
            # Its nats-server and worker 2 went with it.
            await until(lambda: processes_of(home) == [squatter_pid])
            assert not (home / "run" / "cluster.token").exists()
        finally:
            assert squatter_pid is not None
            os.kill(squatter_pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--workers", "0"], "--workers is 1 to 64"),
        (["--workers", "65"], "--workers is 1 to 64"),
        (["--workers", "2", "--cluster", "nats://127.0.0.1:4222"], "it does not go with --cluster"),
        (["--workers", "2", "--cluster-replicas", "3"], "go with --cluster"),
    ],
)
def test_bad_workers_options_are_refused(
    home: Path, argv: list[str], said: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTBUS_RUNTIME_DIR", str(home / "run"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1
    assert not (home / "run").exists()


async def test_a_worker_that_cannot_start_again_is_tried_again_until_it_can(home: Path) -> None:
    with trio.fail_after(BOUND_S):
        async with front_of(home, 1) as front:
            nodes = front.run / "nodes"
            (nodes / "1").rename(nodes / "away")  # its runtime directory a file: it cannot start
            (nodes / "1").write_text("in the way\n")
            os.kill(front.workers[1], signal.SIGKILL)
            log = front.run / "daemon.log"
            await until(lambda: "worker 1 cannot start: [Errno 17] File exists" in log.read_text())
            assert lock_is_held(DaemonPaths(front.run))  # the front goes on meanwhile
            (nodes / "1").unlink()
            (nodes / "away").rename(nodes / "1")
            worker = DaemonPaths(nodes / "1")
            await until(lambda: read_pid(worker) not in (None, front.workers[1]) and lock_is_held(worker))
            assert await worker_answers(home, 1) == read_pid(worker)


async def test_sigterm_of_a_front_in_the_foreground_stops_its_workers_before_it_exits(home: Path) -> None:
    binary_or_skip()
    with trio.fail_after(BOUND_S):
        async with daemon_process(home, "--workers", "1") as front:
            children = processes_of(home)
            assert len(children) == 3  # the front, its worker, its nats-server
            front.proc.send_signal(signal.SIGTERM)
            assert await front.proc.wait() == 0
            assert processes_of(home) == []
            await front.drain()
            assert b"workers and nats-server stopped" in front.log


async def test_a_session_started_through_the_front_runs_on_a_worker(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("from ", "a worker"))
    with trio.fail_after(BOUND_S):
        async with front_of(home, 2) as front, client_of(home) as client:
            ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            await client.subscribe(sid, from_seq=1)
            await client.prompt(sid, "where do you run?")
            turn = await events_until(client)
            assert "from a worker" in "".join(getattr(e.message, "text", "") for e in turn)
            ran_on = [i for i in front.workers if recording_path(home / "data" / "nodes" / str(i), sid).exists()]
            assert len(ran_on) == 1 and not recording_path(home / "data", sid).exists()
            status = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon", "status"))
            assert f"worker {ran_on[0]}: pid {front.workers[ran_on[0]]}, running, 1 session(s)" in status.stdout


def test_a_ready_fd_in_the_environment_is_used_only_when_it_is_a_pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.frontends.daemon._workers import READY_FD_ENV, inherited_ready_fd

    with (tmp_path / "f").open("w") as not_a_pipe:
        monkeypatch.setenv(READY_FD_ENV, str(not_a_pipe.fileno()))
        assert inherited_ready_fd() is None and READY_FD_ENV not in os.environ  # nor passed on
    read_end, write_end = os.pipe()
    try:
        os.set_inheritable(write_end, True)
        monkeypatch.setenv(READY_FD_ENV, str(write_end))
        assert inherited_ready_fd() == write_end and not os.get_inheritable(write_end)
    finally:
        os.close(read_end)
        os.close(write_end)


async def test_a_session_of_a_killed_worker_takes_prompts_again_through_the_front(home: Path) -> None:
    """kill -9 of the worker running a session: the other worker takes it over (the
    killed one's replacement may race it for the lease: whichever wins answers) and the
    front's clients prompt it as before."""
    fake = write_responses(home / "f.responses", text_response("first"), text_response("second"))
    with trio.fail_after(BOUND_S):
        async with front_of(home, 2) as front:
            async with client_of(home) as client:
                sid = (await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
                await client.subscribe(sid, from_seq=1)
                await client.prompt(sid, "one")
                await events_until(client)
            (ran_on,) = [i for i in front.workers if recording_path(home / "data" / "nodes" / str(i), sid).exists()]
            os.kill(front.workers[ran_on], signal.SIGKILL)
            worker = DaemonPaths(front.run / "nodes" / str(ran_on))
            await until(lambda: read_pid(worker) not in (None, front.workers[ran_on]) and lock_is_held(worker))
            async with client_of(home) as client:
                await client.subscribe(sid)  # from now on: this turn's events only
                await client.prompt(sid, "two")
                turn = await events_until(client)
            assert type(turn[-1].message).__name__ == "TurnEnded"
            assert any(getattr(e.message, "text", "") for e in turn)
