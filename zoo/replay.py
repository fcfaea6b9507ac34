"""The thresholded peers, replayed on an observation: a fixture run with no watchdog (`observe`
on pipes, `observe-pty` on a terminal) records every output chunk with its instant, its natural
end and its stall instant. A peer whose decision depends only on the output up to that instant
(a wall clock, an output-idle timer, a screen that stops changing, a prompt at the tail) would
have acted at an instant this record fixes, for every threshold at once: that is how the zoo
draws each peer's curve over its threshold (1·T … 20·T) from one run of the fixture.

Beyond the record (a stalled fixture is cut at its stall + T + window), the fixture is taken to
go on as it ended: noisy (never idle long enough) if anything came in the second half of the
record after its stall instant, silent if nothing did. A kill ends the run, so nothing after it matters; a soft alarm (OpenHands,
Claude Code, codex: control goes back to the model, the command runs on) ends nothing and is
scored as an alarm, not a kill.
"""

import policies

# the thresholds of every curve, in idle timeouts T
SWEEP = (1, 2, 3, 4, 6, 8, 12, 16, 20)


def first_quiet(events, X, end, stalled_after, s):
    """The first instant with no event for X seconds, or None: `events` are sorted instants from
    the start (0); `end` is the natural end (None: cut while still running, then `stalled_after`
    is the instant the record stops)."""
    prev = 0.0
    for e in events:
        if e - prev >= X:
            return prev + X
        prev = e
    if end is not None:
        return prev + X if end - prev >= X else None
    # cut: the record stops at stalled_after; beyond it, the noise goes on if something moved
    # in the second half of the record after the stall instant (a spinner, a heartbeat), else
    # silence (a line printed once just after the stall does not make it noisy)
    if stalled_after - prev >= X:
        return prev + X
    s = s or 0.0
    noisy = any(e > s + (stalled_after - s) / 2 for e in events)
    return None if noisy else prev + X


def screen_changes(trace):
    """Instants at which the modelled screen (policies.Screen, read every SCREEN_POLL s as
    OpenHands reads its tmux pane) differs from the last reading."""
    screen = policies.Screen()
    out, last, i = [], "", 0
    if not trace:
        return out
    t = policies.SCREEN_POLL
    horizon = trace[-1][0] + policies.SCREEN_POLL
    while t <= horizon:
        while i < len(trace) and trace[i][0] <= t:
            screen.feed(trace[i][2])
            i += 1
        text = screen.text()
        if text != last:
            out.append(t)
            last = text
        t += policies.SCREEN_POLL
    return out


def first_prompt(trace):
    """DesktopCommander: the first 100 ms check at which the output so far (both streams, as
    start_process merges them) has a prompt in its last line."""
    tail, pending = "", False
    for i, (t, _, data) in enumerate(trace):
        tail = (tail + data.decode("utf-8", "replace"))[-policies.PROMPT_TAIL:]
        nxt = trace[i + 1][0] if i + 1 < len(trace) else None
        # the check runs every 100 ms: the tail it sees is the one standing at its tick
        if policies.dc_waiting_for_input(tail) and (nxt is None or nxt - t >= 0.1):
            return t + 0.1
    return None


def score_kill(truth, at, end, s, T, window):
    """A kill at `at` (None: never) on a fixture whose natural end is `end` (None: it never
    ended) and stall instant `s`: (outcome, latency past the deadline s + T)."""
    if truth == "working":
        if at is not None and (end is None or at < end):
            return "false_kill", None
        return "ok", None
    if truth == "stalled":
        if at is None:
            return "miss", None
        if s is not None and at < s:
            return "false_kill", None
        lat = at - (s + T)
        if lat <= max(1.0, T / 2):
            return "caught", lat
        return ("late" if lat <= window else "miss"), lat
    # lingering: the leader is gone at s; a kill only makes the caller return
    if at is not None and s is not None and at < s:
        return "false_kill", None
    return "n/a", None


def score_alarm(truth, at, end, s, T):
    """A soft alarm (control back to the model; nothing ended): a false alarm on a working
    fixture before its end; for a stall, the time from its deadline to the first alarm."""
    if truth == "working":
        return ("false_alarm" if at is not None and (end is None or at < end) else "quiet"), None
    if truth == "stalled":
        if at is None:
            return "no_alarm", None
        if s is not None and at < s:
            return "early_alarm", None
        return "alarm", at - (s + T)
    return "n/a", None


def replay(obs, fixture, T, window):
    """Every replayed policy's verdict on one observation run (a dict from run.py: `trace`,
    `end` and `stall` in seconds from the start, `cut_after`). Returns a list of result dicts."""
    truth = fixture["truth"]
    trace, end, s, horizon = obs["trace"], obs["end"], obs["stall"], obs["cut_after"]
    out_events = sorted(t for t, _, _ in trace)
    results = []

    def add(policy, k, kind, at):
        if kind == "kill":
            outcome, lat = score_kill(truth, at, end, s, T, window)
        else:
            outcome, lat = score_alarm(truth, at, end, s, T)
        results.append({"policy": policy, "k": k, "kind": kind, "outcome": outcome,
                        "latency_s": None if lat is None else round(lat, 2),
                        "at_s": None if at is None else round(at, 2)})

    if obs["pty"]:
        changes = screen_changes(trace)
        for k in SWEEP:
            # OpenHands: no screen change for k·T returns control to the model (soft)
            add("openhands-no-change", k, "alarm", first_quiet(changes, k * T, end, horizon, s))
        return results
    for k in SWEEP:
        # GNU timeout (and the Bash tools that kill at their budget): a kill at k·T
        add("wall-clock", k, "kill", k * T)
        # gemini-cli tools.shell.inactivityTimeout: no output event for k·T, the group is killed
        add("output-idle", k, "kill", first_quiet(out_events, k * T, end, horizon, s))
        # the hand-offs at a wall-clock budget, soft: Claude Code moves the command to the
        # background, codex's unified exec yields the session to the model, OpenHands' hard
        # timeout and DesktopCommander's start_process timeout return with the command running
        add("handoff-wall-clock", k, "alarm", k * T)
    # DesktopCommander: a prompt in the last line returns the call early (soft), not thresholded
    add("desktop-commander-prompt", 1, "alarm", first_prompt(trace))
    return results
