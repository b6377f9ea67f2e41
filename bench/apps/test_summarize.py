"""summarize.py on hand-made results (CPU; no PyTorch): the ratios, the SLO count and the BE
window are the ones the files imply, and a failed run is listed as failed."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summarize  # noqa: E402


def write(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f)


class SummarizeTest(unittest.TestCase):
    def test_ratios_slo_and_be_window(self):
        with tempfile.TemporaryDirectory() as out:
            base = os.path.join(out, "resnet50-64-graph__resnet50-64")
            write(os.path.join(base, "be_alone.json"), {"its": 10.0, "iteration_ends": []})
            write(os.path.join(base, "be_alone_mps.json"), {"its": 11.0, "iteration_ends": []})
            ld = os.path.join(base, "load0.3")
            write(os.path.join(ld, "settings.json"), {"target_ms": 15.0})
            write(os.path.join(ld, "lc_alone", "lc.json"), {"latency_s": [0.01] * 100, "p50_s": 0.01, "p99_s": 0.01,
                                                            "window": [0, 1]})
            # 100 requests: 90 at 12 ms, 10 at 30 ms; the LC window is [100, 102] s.
            write(os.path.join(ld, "mps", "lc.json"), {"latency_s": [0.012] * 90 + [0.030] * 10, "window": [100.0, 102.0]})
            # BE: 5 iterations per second inside the window, others outside it.
            ends = [99.0, 99.5] + [100.0 + 0.2 * i for i in range(11)] + [103.0]
            write(os.path.join(ld, "mps", "be.json"), {"iteration_ends": ends})
            os.makedirs(os.path.join(ld, "concord-sgdrc"))
            with open(os.path.join(ld, "concord-sgdrc", "error.txt"), "w") as f:
                f.write("concordd did not come up\n")
            rows = {r["scheme"]: r for r in summarize.rows_of(out)}
            mps = rows["mps"]
            self.assertAlmostEqual(mps["lc_p50_over_alone"], 1.2)
            self.assertAlmostEqual(mps["lc_p99_over_alone"], 3.0)
            self.assertAlmostEqual(mps["slo_attainment"], 0.9)
            self.assertAlmostEqual(mps["be_over_alone"], 11 / 2.0 / 10.0)
            self.assertAlmostEqual(mps["be_over_alone_mps"], 11 / 2.0 / 11.0)
            self.assertIn("did not come up", rows["concord-sgdrc"]["error"])


if __name__ == "__main__":
    unittest.main()
