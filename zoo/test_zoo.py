"""Checks of the zoo itself: `python3 -m unittest zoo/test_zoo.py` (from the repository root).

The headers parse, the zoo has the classes issue 49 asks for, the fast subset is the declared
size, the peer models' pure parts behave as their sources do, the replay scores an observation
as the live models would, a policy template expands, and (when the binary is built) the fast
subset runs under quietus without a runner error. Scores are not asserted: the zoo measures, it
does not gate.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import policies  # noqa: E402
import replay  # noqa: E402
import run  # noqa: E402


class Headers(unittest.TestCase):
    def test_every_fixture_parses_and_the_zoo_is_complete(self):
        fx = run.load_fixtures()
        self.assertGreaterEqual(len(fx), 60)
        self.assertGreaterEqual(sum(1 for f in fx if f["tool"]) * 3, len(fx), "a third real tools")
        for truth in run.TRUTHS:
            self.assertTrue(any(f["truth"] == truth for f in fx), truth)
        self.assertTrue(6 <= sum(f["fast"] for f in fx) <= 8)
        self.assertEqual(sorted(f["name"] for f in fx if f["source"]),
                         ["w_agent_plan_files", "w_poll_ci"])
        self.assertTrue(any(f["pty"] for f in fx))
        self.assertTrue(any(f["stdin"] for f in fx))
        for f in fx:
            self.assertTrue(f["doc"], f["name"])

    def test_a_bad_header_is_refused(self):
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as t:
            t.write("# zoo-truth: working\n# zoo-stdin: tar fast\n# doc\ntrue\n")
        try:
            with self.assertRaises(ValueError):
                run.parse_fixture(t.name)
        finally:
            os.unlink(t.name)


class Models(unittest.TestCase):
    def test_desktop_commander_prompts(self):
        # process-detection.ts: the last line ends with or contains a REPL or shell prompt
        w = policies.dc_waiting_for_input
        self.assertTrue(w("Python 3\n>>> "))
        self.assertTrue(w("out\nuser@host:~$ "))
        self.assertTrue(w("collecting ... "))  # contains "... ": a false "waiting" on progress
        self.assertTrue(w("  % Total    % Received"))  # curl's meter header contains "% "
        self.assertFalse(w("Password: "))
        self.assertFalse(w("Continue? [Y/n] "))
        self.assertFalse(w("> \ndone"))  # only the last line counts

    def test_screen_carriage_return_overwrites(self):
        s = policies.Screen()
        s.feed(b"[##   ] 10%\r[###  ] 20%")
        self.assertEqual(s.text(), "[###  ] 20%")
        s.feed(b"\x1b[2K\ndone\n")
        self.assertEqual(s.text().splitlines()[-1], "done")


class Replay(unittest.TestCase):
    def test_output_idle_fires_at_the_first_long_gap(self):
        # output at 0.5, 1.0, then silence: a 3 s timer fires at 4.0 (the run went on to 12)
        self.assertEqual(replay.first_quiet([0.5, 1.0], 3.0, 12.0, None, None), 4.0)
        # a gap of 2 s never reaches 3 s; the program ends at 10
        self.assertIsNone(replay.first_quiet([2.0, 4.0, 6.0, 8.0], 3.0, 10.0, None, None))

    def test_a_cut_record_goes_on_noisy_or_silent(self):
        spinner = [i / 6 for i in range(1, 66)]  # a spinner to the cut at 11 s, stall at 0
        self.assertIsNone(replay.first_quiet(spinner, 30.0, None, 11.0, 0.0))
        once = [0.05]  # one line just after the stall, then nothing: silent beyond the record
        self.assertAlmostEqual(replay.first_quiet(once, 30.0, None, 11.0, 0.0), 30.05)

    def test_kills_and_alarms_are_scored_apart(self):
        self.assertEqual(replay.score_kill("working", 9.0, 10.5, None, 3, 8)[0], "false_kill")
        self.assertEqual(replay.score_kill("working", None, 10.5, None, 3, 8)[0], "ok")
        out, lat = replay.score_kill("stalled", 5.0, None, 2.0, 3, 8)
        self.assertEqual((out, lat), ("caught", 0.0))
        self.assertEqual(replay.score_kill("stalled", 1.0, None, 2.0, 3, 8)[0], "false_kill")
        self.assertEqual(replay.score_alarm("working", 3.0, 10.5, None, 3)[0], "false_alarm")
        self.assertEqual(replay.score_alarm("stalled", 8.0, None, 2.0, 3), ("alarm", 3.0))

    def test_the_screen_sees_a_spinner_and_not_a_redrawn_line(self):
        same = [(i * 0.2, 1, b"\r[####      ] 40%") for i in range(20)]
        self.assertEqual(len(replay.screen_changes(same)), 1)
        spin = [(i * 0.2, 1, ("\r%s 40%%" % "|/-\\"[i % 4]).encode()) for i in range(20)]
        self.assertGreater(len(replay.screen_changes(spin)), 5)


    def test_desktop_commander_sees_the_tail_at_its_100_ms_tick(self):
        # a prompt overwritten within 100 ms by the next chunk is not seen
        self.assertIsNone(replay.first_prompt([(1.0, 1, b"$ "), (1.05, 1, b"ok\n")]))
        self.assertAlmostEqual(replay.first_prompt([(1.0, 1, b"x\n>>> ")]), 1.1)


class Templates(unittest.TestCase):
    def test_a_template_takes_the_command_and_the_timeout(self):
        class Ctx:
            command = ["sh", "/z/f.sh"]
            T = 3.0
        out = policies.expand_template("wd --idle {T} --ms {T_MS} --end {END_FILE} -- {CMD}", Ctx, "/e")
        self.assertEqual(out, ["wd", "--idle", "3", "--ms", "3000", "--end", "/e", "--", "sh", "/z/f.sh"])
        with self.assertRaises(ValueError):
            policies.expand_template("wd --idle {T}", Ctx, "/e")

    def test_a_bad_policy_is_refused_before_any_run(self):
        self.assertEqual(run.main(["--policy", "nosuch", "-q"]), 2)
        self.assertEqual(run.main(["--policy", "x=wd --idle {T}", "-q"]), 2)


class Tools(unittest.TestCase):
    def test_a_missing_tool_is_named_and_refused(self):
        saved = os.environ["PATH"]
        os.environ["PATH"] = "/nonexistent"
        try:
            self.assertEqual(run.main(["--check-tools"]), 1)
            self.assertEqual(run.main(["--fixture", "s_git_clone_stall", "--policy", "observe", "-q"]), 2)
        finally:
            os.environ["PATH"] = saved


class FastRun(unittest.TestCase):
    @unittest.skipUnless(os.access(run.default_binary(), os.X_OK)
                         and not os.environ.get("ZOO_SKIP_FAST_RUN"),
                         "no quietus binary built, or ZOO_SKIP_FAST_RUN (CI runs it in cargo test)")
    def test_fast_subset_under_quietus(self):
        self.assertEqual(run.main(["--fast", "--policy", "quietus", "--repeat", "1", "-q"]), 0)


if __name__ == "__main__":
    unittest.main()
