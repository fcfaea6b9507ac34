"""The stall zoo's watchdog policies: quietus (the real binary) and four models of the peers'
mechanisms, each run at the benchmark's idle timeout T.

Every policy is a function `run(ctx) -> dict` that starts the fixture (or quietus around it),
watches it the way the peer does, ends it the way the peer does, and says when it ended it
(`ended_at`, the first signal or keystroke, wall clock) and when the run was over for the caller
(`returned_at`). The runner (run.py) owns the fixture's environment, the stall instant, the cut at
the deadline window, the leftover scan and the scoring. How each model follows its source is in
README.md.
"""

import json
import os
import re
import select
import signal
import subprocess
import time

# Run for real by default: quietus (the binary) and the two observations the peers are replayed
# on (replay.py). The two peers that really kill also run for real when named with --policy (their
# leftovers are then measured), at one threshold: T (wall clock: WALL_CLOCK_BUDGET_T). The soft
# peers (OpenHands, DesktopCommander, the hand-offs) end nothing: they are only replayed.
DEFAULT_POLICIES = ["quietus", "quietus-repeat-cap", "observe", "observe-pty"]
POLICIES = DEFAULT_POLICIES + ["output-idle", "wall-clock"]
OBSERVE = ("observe", "observe-pty")

# The runner's one clock: CLOCK_BOOTTIME, which /proc/uptime shows truncated to 10 ms (the
# fixtures and the HTTP server record their stall instants from /proc/uptime, without starting
# a process). Every instant of a run is on it; the stall instants have its 10 ms resolution.
CLOCK_RESOLUTION = 0.01

# quietus's policies: the binary with these options beside `-i T --report FILE`. The second is
# the opt-in that tells repeated output (a retry loop's log lines) from new output.
QUIETUS_OPTIONS = {"quietus": [], "quietus-repeat-cap": ["--solo-cap", "repeated_output=0s"]}

# wall-clock: the budget, in idle timeouts (see README.md: why 3 T).
WALL_CLOCK_BUDGET_T = 3.0
# output-idle: gemini-cli's shell tool kills the group with TERM, then KILL after 200 ms.
OUTPUT_IDLE_KILL_DELAY = 0.2
# screen-no-change: OpenHands polls the tmux pane every 0.5 s.
SCREEN_POLL = 0.5
SCREEN_ROWS = 24
SCREEN_COLS = 80
# the output tail the replay keeps for DesktopCommander's check (its last line is what counts)
PROMPT_TAIL = 4096
# DesktopCommanderMCP src/utils/process-detection.ts at 1eccc8b (2026-07-21), lines 14-25 and
# 54-80: the whole output so far (stdout and stderr merged, as start_process collects them) is
# split into lines; the process waits for input when its last line ends with or contains any
# REPL or shell prompt below. terminal-manager.ts 394-405 checks every 100 ms and returns
# early (isBlocked): the tool call returns to the model, the process runs on (a soft alarm).
DC_PROMPTS = [">>> ", "... ", "> ", "+ ", "julia> ", "       ", "$ ", "# ", "% ", "bash-",
              "zsh-", "mysql> ", "    -> ", "=# ", "-# ", "redis> "]


def dc_waiting_for_input(output):
    """DesktopCommander's analyzeProcessState(...).isWaitingForInput on the output so far."""
    if not output.strip():
        return False
    last = output.split("\n")[-1]
    return any(last.endswith(p) or p in last for p in DC_PROMPTS)


def now():
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def process_start(pid):
    """A process's start on the runner's clock (its stat's starttime: boot-time clock ticks)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        return int(st[st.rindex(")") + 2:].split()[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def killpg(pgid, sig):
    if pgid is None or pgid <= 1 or pgid == os.getpgrp():
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def children_map():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
            ppid = int(s[s.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    return kids


def tree_pids(root):
    """The leader and its descendants by parent pid (a `ps` walk: re-parented orphans are missed)."""
    kids = children_map()
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


class Screen:
    """A tiny terminal: lines, `\\r`, `\\n`, backspace; escape sequences are dropped."""
    ESC = re.compile(rb"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|.)")

    def __init__(self):
        self.lines = [""]
        self.col = 0

    def feed(self, data):
        data = self.ESC.sub(b"", data)
        for ch in data.decode("utf-8", "replace"):
            if ch == "\n":
                self.lines.append("")
                self.col = 0
                self.lines = self.lines[-SCREEN_ROWS:]
            elif ch == "\r":
                self.col = 0
            elif ch == "\b":
                self.col = max(0, self.col - 1)
            elif ch >= " ":
                if self.col >= SCREEN_COLS:
                    self.lines.append("")
                    self.col = 0
                line = self.lines[-1]
                line = line.ljust(self.col)
                self.lines[-1] = line[:self.col] + ch + line[self.col + 1:]
                self.col += 1

    def text(self):
        return "\n".join(self.lines[-SCREEN_ROWS:])


def _spawn(ctx, pty_mode):
    """Start the fixture in a session of its own: pipes (with a stdin pipe the runner never
    writes), or a terminal whose master the runner holds."""
    if pty_mode:
        master, slave = os.openpty()
        import fcntl, struct, termios
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SCREEN_ROWS, SCREEN_COLS, 0, 0))
        # setsid -c: a new session whose controlling terminal is the pty (no fork: the child is
        # not a group leader), then exec the fixture: same pid.
        proc = subprocess.Popen(["setsid", "-c"] + ctx.command, cwd=ctx.workdir, env=ctx.env,
                                stdin=slave, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        return proc, [master], master
    proc = subprocess.Popen(ctx.command, cwd=ctx.workdir, env=ctx.env, stdin=ctx.stdin_r,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True,
                            start_new_session=True)
    return proc, [proc.stdout.fileno(), proc.stderr.fileno()], None


def _read_ready(fds, timeout):
    """Read what is ready; returns (bytes read, fds at EOF)."""
    got, eof, per = b"", [], {}
    if not fds:
        time.sleep(timeout)
        return got, eof, per
    r, _, _ = select.select(fds, [], [], timeout)
    for fd in r:
        try:
            b = os.read(fd, 65536)
        except OSError:  # EIO: the pty's last slave closed
            b = b""
        if b:
            got += b
            per[fd] = b
        else:
            eof.append(fd)
    return got, eof, per


def run_direct(ctx, policy):
    """The four modelled peers: one loop, the policy decides when and how to end."""
    pty_mode = policy == "observe-pty" or ctx.fixture["pty"]
    res = {"ended_at": None, "returned_at": None, "leader_exit": None, "leader_rc": None,
           "cut": False, "how": None}
    t0 = now()
    ctx.t_start = t0
    proc, fds, master = _spawn(ctx, pty_mode)
    ctx.leader_pid = proc.pid
    pgid = proc.pid
    last_out = t0
    tails = {}
    screen = Screen()
    last_screen, last_change, next_poll = "", t0, t0 + SCREEN_POLL
    open_fds = list(fds)
    res["trace"] = trace = []  # (seconds since the start, stream, bytes) of every chunk read
    try:
        while True:
            data, eof, per = _read_ready(open_fds, 0.05)
            t = now()
            for fd in eof:
                open_fds.remove(fd)
            for fd, b in per.items():
                trace.append((t - t0, 1 if fd == fds[0] else 2, b))
            if data:
                last_out = t
                for fd, b in per.items():
                    tails[fd] = (tails.get(fd, "") + b.decode("utf-8", "replace"))[-PROMPT_TAIL:]
                screen.feed(data)
            if res["leader_exit"] is None and proc.poll() is not None:
                res["leader_exit"], res["leader_rc"] = t, proc.returncode
            alive = res["leader_exit"] is None and res["ended_at"] is None

            if policy in ("observe", "observe-pty"):
                # no watchdog: the fixture's own course, every chunk recorded, to the runner's
                # cut (the thresholded peers are replayed on this record: replay.py)
                if res["leader_exit"] is not None and not open_fds:
                    res["returned_at"] = t
                    break

            elif policy == "output-idle":
                # gemini-cli inactivityTimeout / codex stream idle / Symphony stall_timeout_ms:
                # any stdout/stderr chunk resets the timer; at T: TERM the group, KILL 200 ms later.
                # The tool returns at the process's exit, and then ends its group (#13225).
                if alive and t - last_out >= ctx.T:
                    res["ended_at"], res["how"] = t, "TERM+KILL group (output idle)"
                    killpg(pgid, signal.SIGTERM)
                    time.sleep(OUTPUT_IDLE_KILL_DELAY)
                    killpg(pgid, signal.SIGKILL)
                if res["leader_exit"] is not None or res["ended_at"] is not None:
                    if res["ended_at"] is None:
                        killpg(pgid, signal.SIGTERM)
                        time.sleep(OUTPUT_IDLE_KILL_DELAY)
                        killpg(pgid, signal.SIGKILL)
                    proc.wait()
                    res["leader_exit"] = res["leader_exit"] or now()
                    res["returned_at"] = now()
                    break

            elif policy == "wall-clock":
                # GNU `timeout` (Claude Code's / SWE-agent's Bash tool timeout): TERM to its
                # process group at the budget, nothing else; the caller (`| tail`, a pipe
                # reader) returns at EOF of the output, after timeout itself has exited.
                if alive and t - t0 >= WALL_CLOCK_BUDGET_T * ctx.T:
                    res["ended_at"], res["how"] = t, "TERM group (budget)"
                    killpg(pgid, signal.SIGTERM)
                if res["leader_exit"] is not None and not open_fds:
                    res["returned_at"] = t
                    break

            else:
                raise ValueError("unknown policy %r" % policy)

            if t >= ctx.cut_at():
                res["cut"] = True
                break
    finally:
        for fd in fds:
            try:
                if master is not None:
                    os.close(fd)
            except OSError:
                pass
        if master is None:
            proc.stdout.close()
            proc.stderr.close()
    if res["leader_exit"] is None and proc.poll() is not None:
        res["leader_exit"], res["leader_rc"] = now(), proc.returncode
    ctx.proc = proc
    return res


def run_quietus(ctx, options=()):
    """The real binary: `quietus -i T --report FILE [OPTIONS] -- fixture`, defaults otherwise."""
    report = os.path.join(ctx.rundir, "report.json")
    pty = ["--pty"] if ctx.fixture["pty"] else []
    cmd = [ctx.binary, "-i", "%gs" % ctx.T, "--report", report, *options, *pty, "--"] + ctx.command
    res = {"ended_at": None, "returned_at": None, "leader_exit": None, "leader_rc": None,
           "cut": False, "how": None, "report": None}
    t0 = now()
    ctx.t_start = t0
    proc = subprocess.Popen(cmd, cwd=ctx.workdir, env=ctx.env, stdin=ctx.stdin_r,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True,
                            start_new_session=True)
    ctx.leader_pid = proc.pid
    # quietus's own clock (the report's duration_ms) starts in its main(); its process's start,
    # read now, is the closest instant on the runner's clock (10 ms ticks): the end estimated
    # from it is early by quietus's exec and loading at most (classify's tolerance covers the
    # tick)
    q_start = process_start(proc.pid) or t0
    open_fds = [proc.stdout.fileno(), proc.stderr.fileno()]
    err = b""
    try:
        while True:
            r, _, _ = select.select(open_fds, [], [], 0.05) if open_fds else ([], [], time.sleep(0.05))
            for fd in r:
                b = os.read(fd, 65536)
                if not b:
                    open_fds.remove(fd)
                elif fd == proc.stderr.fileno():
                    err = (err + b)[-4000:]
            t = now()
            if proc.poll() is not None and not open_fds:
                res["returned_at"] = t
                res["leader_exit"], res["leader_rc"] = t, proc.returncode
                break
            if t >= ctx.cut_at():
                res["cut"] = True
                break
    finally:
        proc.stdout.close()
        proc.stderr.close()
    res["stderr_tail"] = err.decode("utf-8", "replace").strip().splitlines()[-1:] or []
    try:
        with open(report) as f:
            rep = json.load(f)
    except (OSError, ValueError):
        rep = None
    if rep:
        res["report"] = {k: rep.get(k) for k in ("outcome", "exit_code", "duration_ms", "idle_ms",
                                                 "ladder", "diagnosis", "leftovers_killed",
                                                 "capped")}
        if rep.get("outcome") in ("idle_timeout", "input_wait", "hard_timeout"):
            ladder = rep.get("ladder") or {}
            back = (ladder.get("duration_ms") or 0) / 1000.0
            res["ended_at"] = max(q_start, t0) + rep["duration_ms"] / 1000.0 - back
            res["how"] = rep["outcome"]
        diag = rep.get("diagnosis")
        if diag:
            res["diagnosis"] = diag.get("kind")
            res["diagnosis_summary"] = diag.get("summary")
    ctx.proc = proc
    return res


def expand_template(template, ctx, end_file):
    """`--policy 'NAME=mywatchdog --idle {T} -- {CMD}'`: the template split like a shell line;
    a `{CMD}` word becomes the fixture's command (several words), `{T}` the idle timeout in
    seconds, `{T_MS}` in milliseconds, `{END_FILE}` a path where the watchdog may write the
    instant it first signalled the program (see README.md, "Your watchdog")."""
    import shlex
    out = []
    for word in shlex.split(template):
        if word == "{CMD}":
            out.extend(ctx.command)
            continue
        out.append(word.replace("{T}", "%g" % ctx.T).replace("{T_MS}", "%d" % round(ctx.T * 1000))
                   .replace("{END_FILE}", end_file))
    if not any(w == "{CMD}" for w in shlex.split(template)):
        raise ValueError("a policy template needs a {CMD} word: %r" % template)
    return out


def run_template(ctx, template):
    """Any watchdog, as a command: it runs the fixture; its exit status 0 says the program ran
    to a successful end, anything else that the watchdog ended it (or the program failed). The
    end instant is what it wrote to {END_FILE} (seconds since the epoch, or `up:SECONDS` of
    /proc/uptime), else its own exit."""
    end_file = os.path.join(ctx.rundir, "end")
    cmd = expand_template(template, ctx, end_file)
    res = {"ended_at": None, "returned_at": None, "leader_exit": None, "leader_rc": None,
           "cut": False, "how": None}
    t0 = now()
    ctx.t_start = t0
    proc = subprocess.Popen(cmd, cwd=ctx.workdir, env=ctx.env, stdin=ctx.stdin_r,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True,
                            start_new_session=True)
    ctx.leader_pid = proc.pid
    open_fds = [proc.stdout.fileno(), proc.stderr.fileno()]
    try:
        while True:
            _, eof, _ = _read_ready(open_fds, 0.05)
            for fd in eof:
                open_fds.remove(fd)
            t = now()
            if proc.poll() is not None and not open_fds:
                res["returned_at"] = res["leader_exit"] = t
                res["leader_rc"] = proc.returncode
                break
            if t >= ctx.cut_at():
                res["cut"] = True
                break
    finally:
        proc.stdout.close()
        proc.stderr.close()
    if res["returned_at"] is not None and proc.returncode != 0:
        res["ended_at"], res["how"] = res["returned_at"], "exit %d" % proc.returncode
        try:
            with open(end_file) as f:
                text = f.read().strip()
            if text.startswith("up:"):
                res["ended_at"] = float(text[3:])
            elif text:
                res["ended_at"] = float(text) - time.time() + now()
        except (OSError, ValueError):
            pass
        res["leader_rc"] = 0 if ctx.fixture["truth"] == "lingering" else proc.returncode
    ctx.proc = proc
    return res


TEMPLATES = {}  # NAME -> command template, from --policy NAME=TEMPLATE


def run(ctx, policy):
    if policy in TEMPLATES:
        return run_template(ctx, TEMPLATES[policy])
    if policy in QUIETUS_OPTIONS:
        return run_quietus(ctx, QUIETUS_OPTIONS[policy])
    return run_direct(ctx, policy)
