"""Checks of the zoo itself: `python3 -m unittest zoo/test_zoo.py` (from the repository root).

The headers parse, the fast subset is the declared size, the peer models' pure parts behave as
their sources do, and (when the binary is built) the fast subset runs under quietus without a
runner error. Scores are not asserted: the zoo measures, it does not gate.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import policies  # noqa: E402
import run  # noqa: E402


class Headers(unittest.TestCase):
    def test_every_fixture_parses_and_the_zoo_is_complete(self):
        fx = run.load_fixtures()
        self.assertGreaterEqual(len(fx), 30)
        for truth in run.TRUTHS:
            self.assertTrue(any(f["truth"] == truth for f in fx), truth)
        self.assertTrue(6 <= sum(f["fast"] for f in fx) <= 8)
        for f in fx:
            self.assertTrue(f["doc"], f["name"])


class Models(unittest.TestCase):
    def test_desktop_commander_prompts(self):
        w = policies.dc_waiting_for_input
        self.assertTrue(w("Python 3\n>>> "))
        self.assertTrue(w("out\nuser@host:~$ "))
        self.assertFalse(w("collecting ... "))
        self.assertFalse(w("Password: "))
        self.assertFalse(w("Continue? [Y/n] "))

    def test_screen_carriage_return_overwrites(self):
        s = policies.Screen()
        s.feed(b"[##   ] 10%\r[###  ] 20%")
        self.assertEqual(s.text(), "[###  ] 20%")
        s.feed(b"\x1b[2K\ndone\n")
        self.assertEqual(s.text().splitlines()[-1], "done")


class FastRun(unittest.TestCase):
    @unittest.skipUnless(os.access(run.default_binary(), os.X_OK), "no quietus binary built")
    def test_fast_subset_under_quietus(self):
        self.assertEqual(run.main(["--fast", "--policy", "quietus", "-q"]), 0)


if __name__ == "__main__":
    unittest.main()
