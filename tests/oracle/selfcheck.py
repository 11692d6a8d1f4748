"""The registry and runner shared by the oracle self-check scripts: @check("name") registers a function; run_all
runs them in order and prints 'PASS/FAIL name' lines and the closing 'N passed, M failed' line CTest reads."""
import traceback


class Checks:
    def __init__(self):
        self.results = []

    def check(self, name):
        def deco(fn):
            self.results.append((name, fn))
            return fn
        return deco

    def run_all(self) -> int:
        passed = failed = 0
        for name, fn in self.results:
            try:
                fn()
                passed += 1
                print(f"PASS {name}")
            except Exception as e:  # noqa: BLE001
                failed += 1
                print(f"FAIL {name}\n    {type(e).__name__}: {e}")
                if not isinstance(e, AssertionError):
                    traceback.print_exc()
        print(f"{passed} passed, {failed} failed")
        return failed
