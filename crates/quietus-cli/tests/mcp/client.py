"""Drives `quietus mcp` with the official MCP Python SDK client (the `mcp` package).

Run by tests/mcp/main.rs as `python client.py CASE QUIETUS MARKER SCRATCH`:

- CASE: one of the functions in CASES below;
- QUIETUS: the binary under test;
- MARKER: the test's unique marker, put in the server's environment
  (QUIETUS_TEST_MARKER=MARKER), so every session inherits it and the Rust side can prove
  that nothing (server or session) is left once this script exits;
- SCRATCH: a folder of the test's own (logs, flags).

Every check raises on failure (the script then exits non-zero with the reason). Nothing here
sleeps to wait for a condition: it polls with generous deadlines (a loaded 2-core machine).
"""

import asyncio
import contextlib
import hashlib
import os
import sys
import time

import jsonschema
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:
    from mcp.shared.exceptions import MCPError as ProtocolError
except ImportError:  # mcp 1.x
    from mcp.shared.exceptions import McpError as ProtocolError

GENEROUS = 60.0  # seconds: how long a condition may take at most on a loaded machine
TOOLS = ["exec_command", "write_stdin", "exec_control", "list_exec_sessions"]


def field(obj, snake, camel):
    """A field of an SDK object, as mcp 2.x (snake_case) or 1.x (camelCase) names it."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


def structured(result):
    value = field(result, "structured_content", "structuredContent")
    assert isinstance(value, dict), f"no structured content: {result}"
    return value


def is_error(result):
    return field(result, "is_error", "isError")


def text_of(result):
    return "".join(block.text for block in result.content if block.type == "text")


def tree_pids(tag):
    """Live processes whose environment has SW_MCP_TREE=tag (a session's tree, not the server)."""
    needle = f"SW_MCP_TREE={tag}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state not in ("Z", "X"):
            found.append(int(name))
    return found


async def until(condition, what, timeout=GENEROUS):
    """Polls `condition` (sync or async) until it is true; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        await asyncio.sleep(0.05)


class Server:
    """One `quietus mcp` and a connected, initialized client session."""

    def __init__(self, session, init):
        self.session = session
        self.init = init

    async def call(self, name, arguments):
        return await self.session.call_tool(name, arguments)

    async def exec(self, cmd, tag=None, **arguments):
        arguments["cmd"] = cmd
        if tag is not None:
            arguments.setdefault("env", {})["SW_MCP_TREE"] = tag
        result = await self.call("exec_command", arguments)
        assert not is_error(result), text_of(result)
        return structured(result)

    async def write(self, session_id, chars="", yield_time_ms=250):
        result = await self.call(
            "write_stdin",
            {"session_id": session_id, "chars": chars, "yield_time_ms": yield_time_ms},
        )
        assert not is_error(result), text_of(result)
        return structured(result)

    async def control(self, session_id, action):
        result = await self.call("exec_control", {"session_id": session_id, "action": action})
        return structured(result), is_error(result)

    async def finish(self, answer, collected=""):
        """Polls write_stdin until the session ended; returns the last answer and all output."""
        collected += answer["output"]
        deadline = time.monotonic() + GENEROUS
        while answer["running"]:
            assert time.monotonic() < deadline, f"session {answer['session_id']} never ended"
            answer = await self.write(answer["session_id"], yield_time_ms=500)
            collected += answer["output"]
        return answer, collected


@contextlib.asynccontextmanager
async def connect(quietus, marker, *options, logging_callback=None):
    """The server started with `options`, a client session initialized on it."""
    params = StdioServerParameters(
        command=quietus,
        args=["mcp", *options],
        env={"QUIETUS_TEST_MARKER": marker, "PATH": os.environ["PATH"]},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, logging_callback=logging_callback) as session:
            init = await session.initialize()
            yield Server(session, init)


# ---------------------------------------------------------------------------------------------
# The cases


async def initialize_and_list_tools(quietus, marker, scratch):
    async with connect(quietus, marker) as server:
        init = server.init
        assert field(init, "protocol_version", "protocolVersion") == "2025-06-18", init
        caps = init.capabilities
        assert caps.tools is not None and field(caps.tools, "list_changed", "listChanged") is False
        assert caps.logging is not None, caps
        assert field(init, "server_info", "serverInfo").name == "quietus"
        await server.session.send_ping()
        tools = (await server.session.list_tools()).tools
        assert [t.name for t in tools] == TOOLS, [t.name for t in tools]
        for tool in tools:
            for schema in (
                field(tool, "input_schema", "inputSchema"),
                field(tool, "output_schema", "outputSchema"),
            ):
                assert schema and schema["type"] == "object", (tool.name, schema)
                jsonschema.validators.validator_for(schema).check_schema(schema)
            assert len(tool.description) > 200, tool.name
        by_name = {t.name: field(t, "input_schema", "inputSchema") for t in tools}
        valid = {
            "exec_command": {"cmd": "make", "tty": True, "hard_timeout_ms": None, "env": {"A": "1"},
                             "observe": True},
            "write_stdin": {"session_id": 1, "chars": "y\n"},
            "exec_control": {"session_id": 1, "action": {"type": "keepalive", "extend_timeout_ms": 60000}},
            "list_exec_sessions": {},
        }
        invalid = {
            "exec_command": {"tty": True},
            "write_stdin": {"chars": "y"},
            "exec_control": {"session_id": 1, "action": {"type": "explode"}},
            "list_exec_sessions": {"all": True},
        }
        for name in TOOLS:
            jsonschema.validate(valid[name], by_name[name])
            try:
                jsonschema.validate(invalid[name], by_name[name])
            except jsonschema.ValidationError:
                pass
            else:
                raise AssertionError(f"{name}'s input schema accepts {invalid[name]}")


async def quick_command(quietus, marker, scratch):
    async with connect(quietus, marker) as server:
        started = time.monotonic()
        answer = await server.exec("echo hello; echo oops >&2; exit 3", yield_time_ms=120000)
        took = time.monotonic() - started
        # Answered when the command ended, not at the end of its 120 s window.
        assert took < 60, took
        assert answer["running"] is False and answer["state"] == "ended", answer
        assert answer["exit_code"] == 3 and answer["outcome"] == "exited", answer
        assert answer["output"] == "hello\noops\n", answer
        assert answer["output_bytes"] == 11 and answer["omitted_bytes"] == 0, answer
        assert answer["diagnosis"] is None and answer["log"] is None, answer
        # The session stays known once ended: nothing new to collect.
        again = await server.write(answer["session_id"])
        assert again["running"] is False and again["output"] == "" and again["exit_code"] == 3
        # A bash command and a python3 one, with a working folder and variables.
        answer = await server.exec(
            "bash -c 'echo \"$PWD $GREETING\"'", workdir=scratch, env={"GREETING": "hi"}
        )
        assert answer["output"] == f"{os.path.realpath(scratch)} hi\n", answer
        answer = await server.exec("python3 -c 'import sys; sys.exit(5)'")
        assert answer["exit_code"] == 5, answer


async def long_command_continued(quietus, marker, scratch):
    flag = os.path.join(scratch, "go")
    async with connect(quietus, marker) as server:
        cmd = f"echo first; while [ ! -e {flag} ]; do sleep 0.05; done; echo second"
        answer = await server.exec(cmd, yield_time_ms=300)
        assert answer["running"] is True and answer["exit_code"] is None, answer
        session_id = answer["session_id"]
        collected = answer["output"]
        # Poll until "first" arrived (it may come after the window on a loaded machine).
        while "first" not in collected:
            collected += (await server.write(session_id))["output"]
        open(flag, "w").close()
        answer, collected = await server.finish(await server.write(session_id), collected)
        assert collected == "first\nsecond\n", collected
        assert answer["exit_code"] == 0 and answer["outcome"] == "exited", answer
        # A pipe: write_stdin types into the command's stdin.
        answer = await server.exec("read line; echo \"got $line\"", yield_time_ms=200)
        assert answer["running"] is True, answer
        answer = await server.write(answer["session_id"], "hello\n", yield_time_ms=1000)
        answer, collected = await server.finish(answer)
        assert collected == "got hello\n", collected
        assert answer["exit_code"] == 0, answer


async def tty_prompt(quietus, marker, scratch):
    async with connect(quietus, marker) as server:
        cmd = "test -t 0 && test -t 1 && echo on-a-tty; python3 -c 'n = input(\"Name? \"); print(\"hi\", n)'"
        answer = await server.exec(cmd, tty=True, yield_time_ms=200)
        session_id = answer["session_id"]
        collected = answer["output"]
        while "Name? " not in collected:
            answer = await server.write(session_id)
            assert answer["running"], (answer, collected)
            collected += answer["output"]
        answer = await server.write(session_id, "Ada\n", yield_time_ms=1000)
        answer, collected = await server.finish(answer, collected)
        assert "on-a-tty\r\n" in collected, collected
        assert "hi Ada\r\n" in collected, collected
        assert answer["exit_code"] == 0, answer


async def stalled_command(quietus, marker, scratch):
    tag = f"{marker}-stall"
    async with connect(quietus, marker) as server:
        # A background sleep and a python3 that waits for a line nobody sends.
        cmd = "sleep 600 & python3 -c 'import sys; print(\"ready\", flush=True); sys.stdin.readline()'"
        answer = await server.exec(cmd, tag, idle_timeout_ms=1000, yield_time_ms=120000)
        assert answer["running"] is False, answer
        assert answer["outcome"] == "idle_timeout" and answer["exit_code"] == 124, answer
        diagnosis = answer["diagnosis"]
        assert diagnosis and diagnosis["kind"] == "awaiting_input", answer
        assert "python3" in diagnosis["summary"] and "stdin" in diagnosis["summary"], diagnosis
        assert answer["output"] == "ready\n", answer
        # The whole tree is gone, the background sleep included, while the server runs on.
        assert tree_pids(tag) == [], tree_pids(tag)
        listing = await server.call("list_exec_sessions", {})
        line = structured(listing)["lines"][0]
        assert line.startswith(f"#{answer['session_id']:02} ended idle_timeout waiting for input"), line
        assert " exit_code=124 uptime=" in line, line
        # A bash tree stalled on a sleep, with a hard timeout too.
        answer = await server.exec(
            "bash -c 'sleep 600 & sleep 600; echo never'", f"{tag}-bash",
            idle_timeout_ms=1000, yield_time_ms=120000,
        )
        assert answer["outcome"] == "idle_timeout", answer
        assert answer["diagnosis"] is not None, answer
        assert tree_pids(f"{tag}-bash") == []
        answer = await server.exec(
            "while :; do echo busy; sleep 0.1; done", f"{tag}-hard",
            hard_timeout_ms=1000, yield_time_ms=120000,
        )
        assert answer["outcome"] == "hard_timeout" and answer["exit_code"] == 124, answer
        assert tree_pids(f"{tag}-hard") == []


async def observed_command(quietus, marker, scratch):
    """observe: true (issue 43): a bash command silent for 2.5 s under a 1 s idle timeout is not
    ended; once it exited by itself, `observed` and the text say when and why it would have been."""
    tag = f"{marker}-observe"
    async with connect(quietus, marker) as server:
        result = await server.call("exec_command", {
            "cmd": "bash -c 'echo x; sleep 2.5; echo y; exit 4'", "idle_timeout_ms": 1000,
            "yield_time_ms": 120000, "observe": True, "env": {"SW_MCP_TREE": tag},
        })
        assert not is_error(result), text_of(result)
        answer = structured(result)
        assert answer["running"] is False, answer
        assert answer["outcome"] == "exited" and answer["exit_code"] == 4, answer
        assert answer["output"] == "x\ny\n", answer
        observed = answer["observed"]
        assert observed and observed[0]["outcome"] == "idle_timeout", answer
        assert observed[0]["at_ms"] >= 1000, answer
        assert observed[0]["why"].startswith("ended after 1s idle ("), answer
        assert "Observed only: quietus would have ended after 1s idle" in text_of(result), text_of(result)
        assert tree_pids(tag) == []
        # Without it, nothing is observed.
        answer = await server.exec("true")
        assert answer["observed"] == [], answer


async def controls(quietus, marker, scratch):
    tag = f"{marker}-ctl"
    async with connect(quietus, marker) as server:
        # A blocking exec_command does not hold up other requests: terminate it from another.
        waiting = asyncio.ensure_future(server.exec("sleep 600", tag, yield_time_ms=120000))

        async def listed():
            lines = structured(await server.call("list_exec_sessions", {}))["sessions"]
            return lines[0]["session_id"] if lines else None

        session_id = await until(listed, "the session listed")
        status, error = await server.control(session_id, {"type": "keepalive"})
        assert status == {"session_id": session_id, "status": "ack", "note": None} and not error
        status, _ = await server.control(session_id, {"type": "keepalive", "extend_timeout_ms": 60000})
        assert status["status"] == "ack", status
        status, _ = await server.control(session_id, {"type": "set_idle_timeout", "timeout_ms": 120000})
        assert status["status"] == "ack", status
        status, _ = await server.control(session_id, {"type": "terminate"})
        assert status["status"] == "ack", status
        answer = await waiting
        assert answer["outcome"] == "terminated" and answer["exit_code"] == 143, answer
        status, error = await server.control(session_id, {"type": "terminate"})
        assert status["status"] == "already_terminated" and not error, status
        # force_kill: SIGKILL to the tree at once, even for a process that ignores TERM.
        answer = await server.exec("trap '' TERM; echo armed; sleep 600", tag, yield_time_ms=200)
        status, _ = await server.control(answer["session_id"], {"type": "force_kill"})
        assert status["status"] == "ack", status
        answer, _ = await server.finish(answer)
        assert answer["outcome"] == "terminated" and answer["exit_code"] == 137, answer
        # send_ctrl_c: SIGINT to the group.
        answer = await server.exec("sleep 600", tag, yield_time_ms=200)
        status, _ = await server.control(answer["session_id"], {"type": "send_ctrl_c"})
        assert status["status"] == "ack", status
        answer, _ = await server.finish(answer)
        assert answer["outcome"] == "exited" and answer["exit_code"] == 130, answer
        status, error = await server.control(4242, {"type": "terminate"})
        assert status["status"] == "no_such_session" and error, status
        assert tree_pids(tag) == []


async def large_output(quietus, marker, scratch):
    logs = os.path.join(scratch, "logs")
    os.makedirs(logs, exist_ok=True)
    async with connect(quietus, marker, "--log-dir", logs) as server:
        answer = await server.exec("seq 1 200000", max_output_bytes=1024, yield_time_ms=120000)
        answer, collected = await server.finish(answer)
        assert answer["exit_code"] == 0, answer
        total = sum(len(f"{n}\n") for n in range(1, 200001))
        assert answer["total_output_bytes"] == total, answer
        assert collected.startswith("1\n2\n3\n"), collected[:50]
        assert collected.endswith("199999\n200000\n"), collected[-50:]
        assert answer["omitted_bytes"] == total - 1024, answer
        assert len(collected.encode()) < 1024 + 100, len(collected)
        log = answer["log"]
        assert log and log["complete"] and log["bytes"] == total, log
        assert os.path.dirname(log["path"]) == logs, log
        with open(log["path"], "rb") as f:
            content = f.read()
        assert len(content) == total
        assert hashlib.sha256(content).hexdigest() == log["sha256"], log
        assert content == b"".join(f"{n}\n".encode() for n in range(1, 200001))
        # Short output has no log.
        answer = await server.exec("echo short", max_output_bytes=1024)
        assert answer["log"] is None, answer


async def client_disconnects(quietus, marker, scratch):
    tag = f"{marker}-gone"
    async with connect(quietus, marker) as server:
        await server.exec("sleep 600 & trap '' TERM; sleep 600", tag, yield_time_ms=200)
        await server.exec("python3 -c 'import time; time.sleep(600)'", tag, tty=True, yield_time_ms=200)
        await server.exec("bash -c 'sleep 600 & wait'", tag, yield_time_ms=200)
        await until(lambda: len(tree_pids(tag)) >= 5, "every session's processes running")
    # The client closed the server's stdin (and the SDK may have sent TERM after a while).
    await until(lambda: tree_pids(tag) == [], "every session's tree gone")


async def malformed_calls(quietus, marker, scratch):
    async with connect(quietus, marker) as server:
        cases = [
            ("exec_command", {}, "cmd: missing"),
            ("exec_command", {"cmd": "true", "idle_timeout_ms": 5}, "idle_timeout_ms: 5 is out of range"),
            ("exec_command", {"cmd": "true", "yield": 5}, 'unknown field "yield"'),
            ("exec_command", {"cmd": "true", "workdir": "/no/such/folder"}, "is not a folder"),
            ("write_stdin", {"session_id": 4242}, "no session has session_id 4242"),
            ("write_stdin", {"session_id": -1}, "session_id"),
            ("exec_control", {"session_id": 1, "action": "stop"}, "is not an action"),
        ]
        for name, arguments, words in cases:
            result = await server.call(name, arguments)
            assert is_error(result), (name, arguments, result)
            assert words in text_of(result), (name, arguments, text_of(result))
        try:
            await server.call("no_such_tool", {})
        except ProtocolError as e:
            assert e.error.code == -32602, e.error
        else:
            raise AssertionError("an unknown tool is a protocol error")
        # A program that cannot start is the shell's 127, as in a terminal.
        answer = await server.exec("no-such-program-xyz")
        assert answer["exit_code"] == 127, answer
        # The server goes on.
        await server.session.send_ping()
        answer = await server.exec("echo still here")
        assert answer["output"] == "still here\n", answer
    # A shell that cannot start: a tool error that names the step and the program.
    async with connect(quietus, marker, "--shell", "/no/such/shell") as server:
        result = await server.call("exec_command", {"cmd": "true"})
        assert is_error(result), result
        words = text_of(result)
        assert "could not be started (program)" in words and "/no/such/shell" in words, words
        listing = structured(await server.call("list_exec_sessions", {}))
        assert listing == {"sessions": [], "lines": []}, listing


async def announcements(quietus, marker, scratch):
    messages = []

    async def on_message(params):
        messages.append((params.level, str(params.data)))

    async with connect(quietus, marker, "--announce-ended", logging_callback=on_message) as server:
        answer = await server.exec("sleep 0.5; exit 4", yield_time_ms=0)
        first = answer["session_id"]
        if not answer["running"]:
            raise AssertionError("a 0.5 s command ended within a 0 ms window")
        await until(lambda: messages, "an announcement")
        level, data = messages[0]
        assert level == "info" and data.startswith(f"session {first} exited with exit code 4"), messages
        await server.session.set_logging_level("warning")
        messages.clear()
        answer = await server.exec("sleep 0.5; exit 5", yield_time_ms=0)
        quiet = answer["session_id"]

        async def ended(session_id):
            sessions = structured(await server.call("list_exec_sessions", {}))["sessions"]
            return any(s["session_id"] == session_id and not s["running"] for s in sessions)

        await until(lambda: ended(quiet), "the quiet session ended")
        answer = await server.exec("sleep 600", idle_timeout_ms=1000, yield_time_ms=0)
        stalled = answer["session_id"]
        await until(lambda: messages, "the stall announcement")
        level, data = messages[0]
        assert level == "warning", messages
        assert data.startswith(f"session {stalled} ended after 1s idle: "), messages
        assert all(f"session {quiet} " not in d for _, d in messages), messages


async def what_the_model_is_told(quietus, marker, scratch):
    """Clients forward only the structured result: the advice, the diagnosis with its
    processes, and the background jobs ended must all be in it (issue 38)."""
    tag = f"{marker}-told"
    async with connect(quietus, marker) as server:
        # A command whose background job outlives it: the job is ended, and named.
        answer = await server.exec("sleep 600 & echo started", tag, yield_time_ms=120000)
        assert answer["outcome"] == "exited" and answer["exit_code"] == 0, answer
        assert answer["note"] is None, answer  # ended within the window: nothing was cut
        jobs = answer["background_jobs_ended"]
        assert [(j["name"], j["command"]) for j in jobs] == [("sleep", "sleep 600")], answer
        assert isinstance(jobs[0]["pid"], int), jobs
        assert "background jobs were ended" in answer["advice"], answer
        assert f"sleep (pid {jobs[0]['pid']})" in answer["advice"], answer
        assert tree_pids(tag) == []
        listed = structured(await server.call("list_exec_sessions", {}))["sessions"]
        mine = [s for s in listed if s["session_id"] == answer["session_id"]][0]
        assert mine["background_jobs_ended"] == jobs and mine["advice"] == answer["advice"], mine
        # A hang under the wrapper shell: the sleep is named, the shell stays in the list.
        answer = await server.exec("echo started; sleep 1000", tag, idle_timeout_ms=1000, yield_time_ms=120000)
        assert answer["outcome"] == "idle_timeout", answer
        diagnosis = answer["diagnosis"]
        assert diagnosis["kind"] == "sleeping", answer
        by_name = {p["name"]: p for p in diagnosis["processes"]}
        sleep = by_name["sleep"]
        assert diagnosis["summary"] == f"sleeping — sleep (pid {sleep['pid']}) sleeps (clock_nanosleep)", diagnosis
        shell = diagnosis["processes"][0]
        assert shell["kind"] == "waiting_on_child" and shell["waits_on"] == sleep["pid"], diagnosis
        assert answer["advice"].startswith("quietus ended it and its whole process tree after 1s"), answer
        assert answer["background_jobs_ended"] == [], answer
        # An input wait: the advice says what to do about it.
        answer = await server.exec(
            "python3 -c 'import sys; print(\"ready\", flush=True); sys.stdin.readline()'", tag,
            idle_timeout_ms=1000, yield_time_ms=120000,
        )
        assert answer["diagnosis"]["kind"] == "awaiting_input", answer
        assert "waited for input nobody gave" in answer["advice"], answer
        # An MCP-server-like child reading its parent's pipe while the parent sleeps: never
        # an input wait; the parent's sleep is named.
        script = (
            "import subprocess, sys, time\n"
            "s = subprocess.Popen([sys.executable, '-c', 'import sys\\nfor l in sys.stdin: print(l, flush=True)'], stdin=subprocess.PIPE)\n"
            "s.stdin.write(b'{}\\n'); s.stdin.flush()\n"
            "print('ready', flush=True)\n"
            "time.sleep(1000)\n"
        )
        path = os.path.join(scratch, "agent.py")
        with open(path, "w") as f:
            f.write(script)
        answer = await server.exec(f"exec python3 {path}", tag, idle_timeout_ms=1000, yield_time_ms=120000)
        diagnosis = answer["diagnosis"]
        assert diagnosis["kind"] == "sleeping", answer
        parent = diagnosis["processes"][0]
        assert diagnosis["summary"].startswith(f"sleeping — python3 (pid {parent['pid']})"), diagnosis
        assert all(p["kind"] != "awaiting_input" for p in diagnosis["processes"]), diagnosis
        assert diagnosis["processes"][1]["waits_on"] == parent["pid"], diagnosis
        assert tree_pids(tag) == []
        if os.environ.get("QUIETUS_MCP_SHOW"):
            print(answer, file=sys.stderr)


def sdk_major():
    from importlib.metadata import version
    return int(version("mcp").split(".")[0])


async def calls_fit_the_clients_limits(quietus, marker, scratch):
    """A yield above the clamp answers within it, with progress to a caller that asked; an
    answer the client gave up on loses no output (issue 38, point 5)."""
    tag = f"{marker}-limits"
    async with connect(quietus, marker) as server:
        progress = []

        async def on_progress(value, total, message):
            progress.append((value, total, message))

        cmd = "for i in $(seq 1 34); do echo line $i; sleep 1; done"
        started = time.monotonic()
        result = await server.session.call_tool(
            "exec_command",
            {"cmd": cmd, "yield_time_ms": 120000, "env": {"SW_MCP_TREE": tag}},
            progress_callback=on_progress,
        )
        took = time.monotonic() - started
        answer = structured(result)
        # Answered at the clamp (30 s), well within a client's 60 s, the command still running.
        assert took < 55, took
        assert answer["running"] is True and answer["wall_time_ms"] >= 30000, answer
        assert "waited 30000 ms at most" in answer["note"], answer
        assert len(progress) >= 3, progress
        values = [p[0] for p in progress]
        assert values == sorted(values) and len(set(values)) == len(values), progress
        assert all(p[1] == 30.0 and "still running" in p[2] for p in progress), progress
        answer, collected = await server.finish(answer)
        assert collected == "".join(f"line {i}\n" for i in range(1, 35)), collected
        # A client that gives up after 2 s (and says so, notifications/cancelled, as the SDKs
        # do): the output its abandoned answer would have carried comes with the next one.
        assert sdk_major() >= 2, "mcp 2.x sends notifications/cancelled when it gives up; 1.x does not"
        cmd = "for i in $(seq 1 10); do echo line $i; sleep 0.3; done"
        try:
            await server.session.call_tool(
                "exec_command",
                {"cmd": cmd, "yield_time_ms": 20000, "env": {"SW_MCP_TREE": tag}},
                read_timeout_seconds=2.0,
            )
        except ProtocolError:
            pass
        else:
            raise AssertionError("the call was expected to time out at the client")
        sessions = structured(await server.call("list_exec_sessions", {}))["sessions"]
        session_id = max(s["session_id"] for s in sessions)
        answer, collected = await server.finish(await server.write(session_id))
        assert collected == "".join(f"line {i}\n" for i in range(1, 11)), collected
        assert answer["exit_code"] == 0, answer
        assert tree_pids(tag) == []


CASES = {f.__name__: f for f in [
    what_the_model_is_told, calls_fit_the_clients_limits,
    initialize_and_list_tools, quick_command, long_command_continued, tty_prompt,
    stalled_command, observed_command, controls, large_output, client_disconnects, malformed_calls, announcements,
]}


def main():
    case, quietus, marker, scratch = sys.argv[1:5]
    asyncio.run(asyncio.wait_for(CASES[case](quietus, marker, scratch), 240))
    print(f"{case}: ok")


if __name__ == "__main__":
    main()
