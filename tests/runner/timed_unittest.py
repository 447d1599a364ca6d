"""timed_unittest.py - `python -m unittest` that also says how long each test took.

Runs like `python -m unittest [-v] MODULE...` (same arguments, same output,
same exit status) and ends with a "slow-test: SECONDSs TEST_ID" line for
each of its ten slowest tests, a class's setUpClass and tearDownClass
counted as a test of their own (the daemons most classes start live there).
scripts/run-tests.sh gathers those lines from every suite's log and prints
the ten slowest of the whole run.

    python -m timed_unittest -v test_http      (with tests/runner on PYTHONPATH)
"""
import sys
import time
import unittest


class TimedResult(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.times = []
        self._mark = time.monotonic()  # the end of the previous test: what follows is fixtures
        self._last_class = None

    def _between(self, test):
        """Time since the previous test ended: a class change means its fixtures ran."""
        now = time.monotonic()
        cls = type(test).__module__ + "." + type(test).__qualname__
        if cls != self._last_class and now - self._mark > 0.05:
            self.times.append((now - self._mark, f"{cls} (class set-up and the previous class's tear-down)"))
        self._last_class = cls
        return now

    def startTest(self, test):
        self._start = self._between(test)
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        self._mark = time.monotonic()
        self.times.append((self._mark - self._start, test.id()))


class TimedRunner(unittest.TextTestRunner):
    resultclass = TimedResult

    def run(self, test):
        result = super().run(test)
        for secs, name in sorted(result.times, reverse=True)[:10]:
            self.stream.writeln(f"slow-test: {secs:.2f}s {name}")
        self.stream.flush()
        return result


if __name__ == "__main__":
    sys.argv[0] = "python -m timed_unittest"
    unittest.main(module=None, testRunner=TimedRunner)
