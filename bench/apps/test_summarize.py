"""summarize.py on hand-made results (CPU; no PyTorch): the raw files of runs before rounds read as
one round with the figures they imply, rounds pool with each scheme judged against its own group's
alone, an LLM service is judged on its per-token p99, and the dominance table calls beats, loses,
trade-offs and noise as the intervals say."""
import json
import os
import random
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shares  # noqa: E402
import stats  # noqa: E402
import summarize  # noqa: E402

RESAMPLES = 100


def write(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f)


def phase(latencies, window, **extra):
    return {"latency_s": latencies, "window": window, **extra}


def ends_at(its, lo, hi):
    """Iteration ends at `its` per second from lo to hi."""
    return [lo + i / its for i in range(int((hi - lo) * its) + 1)]


def noisy(rng, p99_s, n):
    """n latencies around p99_s / 2 with a tail whose p99 is about p99_s."""
    return [p99_s * (0.5 + 0.5 * rng.random() ** 8) for _ in range(n)]


def rows_by(out, **kw):
    return {(r["scheme"], r["load"]): r for r in summarize.rows_of(out, resamples=RESAMPLES, **kw)}


class LegacyLayoutTest(unittest.TestCase):
    """A run made before rounds: one folder per scheme, lc_alone/, be_alone.json: one round."""

    def make(self, out):
        base = os.path.join(out, "resnet50-64-graph__resnet50-64")
        write(os.path.join(base, "settings.json"), {"loads": [0.3, 0.6], "targets_ms": [15.0, 15.0]})
        write(os.path.join(base, "be_alone.json"), {"its": 10.0, "iteration_ends": ends_at(10.0, 0.0, 12.0)})
        write(os.path.join(base, "be_alone_mps.json"), {"its": 11.0, "iteration_ends": ends_at(11.0, 0.0, 12.0)})
        alone = phase([0.010] * 100, [0.0, 1.0])
        write(os.path.join(base, "lc_alone", "lc.json"), {"graph": True, "phases": [alone, alone]})
        return base

    def test_ratios_slo_and_be_window(self):
        with tempfile.TemporaryDirectory() as out:
            base = self.make(out)
            # 100 requests: 90 at 12 ms, 10 at 30 ms.
            lat = [0.012] * 90 + [0.030] * 10
            write(os.path.join(base, "mps", "lc.json"), {"graph": True, "phases": [phase(lat, [100.0, 102.0]), phase(lat, [200.0, 201.0])]})
            # BE: 5 iterations per second inside the first window, 4 inside the second.
            ends = [99.0, 99.5] + [100.0 + 0.2 * i for i in range(11)] + [103.0] + ends_at(4.0, 199.0, 202.0)
            write(os.path.join(base, "mps", "be.json"), {"iteration_ends": ends})
            os.makedirs(os.path.join(base, "concord-sgdrc"))
            with open(os.path.join(base, "concord-sgdrc", "error.txt"), "w") as f:
                f.write("concordd did not come up\n")
            rows = rows_by(out)
            mps = rows[("mps", 0.3)]
            self.assertEqual(mps["rounds"], 1)
            self.assertEqual(mps["alone_ref"], "alone", "runs before rounds compared everything with the plain LC alone")
            self.assertAlmostEqual(mps["lc_p50_over_alone"]["value"], 1.2)
            self.assertAlmostEqual(mps["lc_p99_over_alone"]["value"], 3.0)
            self.assertEqual(mps["p99_over_alone_rounds"], [3.0])
            self.assertAlmostEqual(mps["slo_attainment"], 0.9)
            # The first iteration ending in the window (at 100.0) began at 99.5.
            self.assertAlmostEqual(mps["be_its"]["value"], 11 / 2.5)
            self.assertAlmostEqual(mps["be_over_alone"]["value"], 11 / 2.5 / 10.0)
            self.assertAlmostEqual(mps["be_over_alone_mps"]["value"], 11 / 2.5 / 11.0)
            self.assertAlmostEqual(rows[("mps", 0.6)]["be_its"]["value"], 4.0)
            self.assertFalse(mps["enough"], "100 requests leave one above the p99")
            self.assertIn("did not come up", rows[("concord-sgdrc", 0.3)]["error"])

    def test_two_folders_are_two_rounds(self):
        with tempfile.TemporaryDirectory() as top:
            outs = []
            for k, p99 in enumerate((0.020, 0.040)):
                out = os.path.join(top, f"rep{k}")
                base = self.make(out)
                write(os.path.join(base, "mps", "lc.json"), {"phases": [phase([p99] * 100, [0.0, 1.0])] * 2})
                write(os.path.join(base, "mps", "be.json"), {"iteration_ends": ends_at(9.0, 0.0, 1.0)})
                outs.append(out)
            mps = rows_by(outs)[("mps", 0.3)]
            self.assertEqual(mps["rounds"], 2)
            self.assertEqual(mps["requests"], 200)
            self.assertEqual(mps["p99_over_alone_rounds"], [2.0, 4.0])
            self.assertAlmostEqual(mps["lc_p99_over_alone"]["value"], 4.0, msg="the pooled p99 of 20 and 40 ms requests")


class RoundsTest(unittest.TestCase):
    """Three rounds, each with its own LC alone per group: the default configuration against the
    baselines, by intervals."""

    def make(self, out, schemes, llm=False):
        rng = random.Random(1)
        base = os.path.join(out, "bert-32-graph__bert-16")
        write(os.path.join(base, "settings.json"), {"loads": [0.3], "targets_ms": [30.0], "rounds": 3})
        for k in range(1, 4):
            rd = os.path.join(base, f"round{k}")
            write(os.path.join(rd, "be-alone", "be.json"), {"iteration_ends": ends_at(40.0, 0.0, 4.0), "window": [0.0, 4.0]})
            write(os.path.join(rd, "be-alone-mps", "be.json"), {"iteration_ends": ends_at(50.0, 0.0, 4.0), "window": [0.0, 4.0]})
            for group in ("alone", "alone-mps"):
                write(os.path.join(rd, group, "lc.json"), {"graph": True, "phases": [self.phase(rng, 0.010, llm, k)]})
            # Each round's window lies 10 s after the previous one's, its BE iterations inside it.
            for scheme, (p99_s, its, ref) in schemes.items():
                write(os.path.join(rd, scheme, "lc.json"), {"graph": True, "alone_ref": ref, "phases": [self.phase(rng, p99_s, llm, k)]})
                write(os.path.join(rd, scheme, "be.json"), {"iteration_ends": ends_at(its, 10.0 * k, 10.0 * k + 2.0)})
        return base

    @staticmethod
    def phase(rng, p99_s, llm, k):
        window = [10.0 * k, 10.0 * k + 2.0]
        if not llm:
            return phase(noisy(rng, p99_s, 700), window)
        # 20 requests of 64 tokens: the per-token times carry the p99, the requests do not.
        return phase([0.5] * 20, window, ttft_s=[0.01] * 20, tpot_s=[noisy(rng, p99_s, 64) for _ in range(20)])

    def test_the_default_against_each_baseline(self):
        with tempfile.TemporaryDirectory() as out:
            self.make(out, {
                "concord": (0.010, 30.0, "alone-mps"),
                "mps": (0.025, 30.0, "alone-mps"),            # worse tail, same BE: within noise on BE
                "mps-prio": (0.030, 10.0, "alone-mps"),       # worse on both: the default dominates it
                "mps-be25": (0.010, 10.0, "alone-mps"),       # same tail, less BE
                "timeslice": (0.005, 45.0, "alone"),          # better on both: the default is dominated
                "priority-streams": (0.005, 10.0, "alone"),   # better tail, less BE: a trade-off
                "concord-orion": (0.009, 30.0, "alone-mps"),
            })
            rows = summarize.rows_of(out, resamples=RESAMPLES)
            ours = next(r for r in rows if r["scheme"] == "concord")
            self.assertEqual(ours["rounds"], 3)
            self.assertEqual(ours["requests"], 2100)
            self.assertTrue(ours["enough"])
            self.assertEqual(len(ours["p99_over_alone_rounds"]), 3)
            self.assertAlmostEqual(ours["be_its"]["value"], 30.0, places=6)
            self.assertAlmostEqual(ours["be_over_alone"]["value"], 30.0 / 40.0, places=6)
            self.assertLess(ours["lc_p99_over_alone"]["lo"], 1.0)
            self.assertGreater(ours["lc_p99_over_alone"]["hi"], 1.0, "concord's tail is the alone's")
            v = summarize.verdicts(rows)[0]
            self.assertEqual(v["default"], "concord")
            got = {s: (c["lc"], c["be"], c["dominance"]) for s, c in v["against"].items()}
            self.assertEqual(got["mps"], ("beats", "within noise", "within noise"))
            self.assertEqual(got["mps-prio"], ("beats", "beats", "dominates"))
            self.assertEqual(got["mps-be25"], ("within noise", "beats", "within noise"))
            self.assertEqual(got["timeslice"], ("loses", "loses", "dominated"))
            self.assertEqual(got["priority-streams"], ("loses", "beats", "trade-off"))
            self.assertEqual(v["dominated_by"], ["timeslice"])
            self.assertFalse(v["dominated_by_mps_or_prio"])
            self.assertEqual(v["target_lc"], "met")
            self.assertEqual(v["best_of"]["scheme"], "concord-orion")
            text = summarize.tables(rows, summarize.verdicts(rows))
            self.assertIn("| bert-32-graph__bert-16 | 0.3 | concord | timeslice | loses | loses | dominated |", text)
            self.assertIn("picked after the run", text)

    def test_a_scheme_failed_in_one_round_keeps_the_others(self):
        with tempfile.TemporaryDirectory() as out:
            base = self.make(out, {"concord": (0.010, 30.0, "alone-mps")})
            rd = os.path.join(base, "round2", "concord")
            os.remove(os.path.join(rd, "lc.json"))
            with open(os.path.join(rd, "error.txt"), "w") as f:
                f.write("the LC service failed (rc 1)\n")
            row = next(r for r in summarize.rows_of(out, resamples=RESAMPLES) if r["scheme"] == "concord")
            self.assertEqual(row["rounds"], 2)
            self.assertEqual(row["requests"], 1400)
            self.assertFalse(row["enough"])
            self.assertEqual(row["round_numbers"], [1, 3])
            self.assertEqual(row["left_out"], ["round 2: the LC service failed (rc 1)"])

    def test_a_round_whose_alone_the_deadline_cut_is_left_out_of_that_scheme_alone(self):
        # Round 3's plain group was cut by the deadline (as timeslice's was on the H200): the
        # plain-group scheme pools rounds 1-2 against their alone, the MPS-group one all three.
        with tempfile.TemporaryDirectory() as out:
            base = self.make(out, {"concord": (0.010, 30.0, "alone-mps"), "timeslice": (0.020, 20.0, "alone")})
            for entry in ("alone", "timeslice"):
                shutil.rmtree(os.path.join(base, "round3", entry))
            with open(os.path.join(base, "skipped.txt"), "w") as f:
                f.write("round 3 alone\nround 3 be-alone\nround 3 timeslice\n")
            rows = {r["scheme"]: r for r in summarize.rows_of(out, resamples=RESAMPLES)}
            ts = rows["timeslice"]
            self.assertNotIn("error", ts)
            self.assertEqual((ts["rounds"], ts["rounds_planned"], ts["requests"]), (2, 3, 1400))
            self.assertEqual(ts["left_out"], ["round 3: not run (the deadline)"])
            alone = [x for k in (1, 2) for x in summarize.load_json(os.path.join(base, f"round{k}", "alone", "lc.json"))["phases"][0]["latency_s"]]
            self.assertAlmostEqual(ts["alone_p99_ms"]["value"], 1e3 * stats.percentile(alone, 99), msg="the alone of rounds 1-2 only")
            self.assertEqual(len(ts["p99_over_alone_rounds"]), 2)
            self.assertEqual(rows["concord"]["rounds"], 3)
            text = summarize.tables(list(rows.values()), summarize.verdicts(list(rows.values())))
            self.assertIn("| timeslice | 2 of 3 | 1400 |", text)
            self.assertIn("Rounds left out: timeslice (round 3: not run (the deadline)).", text)
            self.assertIn("| bert-32-graph__bert-16 | 0.3 | concord | timeslice |", text, "judged on the rounds they share")

    def test_the_alone_missing_from_a_round_the_scheme_ran_in(self):
        # The MPS group's alone cut in round 3 while the scheme's job ran (its folder kept): the
        # scheme's round 3 has no reference and is left out; a round cut whole is counted too.
        with tempfile.TemporaryDirectory() as out:
            base = self.make(out, {"concord": (0.010, 30.0, "alone-mps")})
            shutil.rmtree(os.path.join(base, "round3", "alone-mps"))
            with open(os.path.join(base, "skipped.txt"), "w") as f:
                f.write("round 3 alone-mps\nround 4 alone-mps\nround 4 concord\n")
            row = next(r for r in summarize.rows_of(out, resamples=RESAMPLES) if r["scheme"] == "concord")
            self.assertEqual((row["rounds"], row["rounds_planned"]), (2, 4))
            self.assertEqual(row["left_out"], ["round 3: its alone (alone-mps) not run (the deadline)",
                                               "round 4: not run (the deadline)"])

    def test_an_llm_service_is_judged_on_its_per_token_tail(self):
        with tempfile.TemporaryDirectory() as out:
            self.make(out, {"concord": (0.010, 30.0, "alone-mps"), "mps": (0.030, 30.0, "alone-mps")}, llm=True)
            rows = summarize.rows_of(out, resamples=RESAMPLES)
            ours = next(r for r in rows if r["scheme"] == "concord")
            self.assertTrue(ours["llm"])
            self.assertEqual(ours["tokens"], 3 * 20 * 64)
            self.assertFalse(ours["enough"], "60 requests")
            self.assertTrue(ours["tokens_enough"])
            self.assertEqual(summarize.lc_axis(ours), "tpot_p99_ms")
            v = summarize.verdicts(rows)[0]
            self.assertTrue(v["enough"])
            self.assertEqual(v["against"]["mps"]["lc"], "beats", "the requests are all 0.5 s: only the tokens tell")


class SharesTest(unittest.TestCase):
    """shares.py: a kernel moved off the job's own streams went out on the SM-count context, one
    with more shared memory than alone was padded, and the shares add up by launches and by time."""

    def doc(self):
        def row(stream, name, smem, n, us):
            return {"stream": stream, "name": name, "grid": [132, 1, 1], "block": [256, 1, 1], "smem": smem, "launches": n, "gpu_us": us}
        alone = [row(7, "gemm", 1024, 10, 100.0), row(7, "relu", 0, 10, 10.0)]
        run = [row(7, "gemm", 1024, 60, 600.0),     # as alone
               row(7, "gemm", 50000, 10, 200.0),    # padded on its own stream
               row(31, "gemm", 50000, 10, 300.0),   # padded on a green stream
               row(31, "relu", 0, 10, 20.0),        # on a green stream, not padded
               row(7, "softmax", 0, 10, 80.0)]      # never seen alone
        return {"alone": alone, "run": run, "windows": 4}

    def test_classes(self):
        s = shares.classify(self.doc())
        c = s["classes"]
        self.assertEqual([c[k]["launches"] for k in shares.CLASSES], [60, 10, 10, 10, 10])
        self.assertEqual(s["launches"], 100)
        self.assertAlmostEqual(s["gpu_us"], 1200.0)
        self.assertAlmostEqual(c["both"]["time_share"], 0.25)
        self.assertAlmostEqual(c["none"]["launch_share"], 0.6)
        self.assertAlmostEqual(sum(v["time_share"] for v in c.values()), 1.0)
        self.assertIn("| r | concord-orion-s66 | 4 | 100 | 60.0% / 50.0% |", shares.table([("r", "concord-orion-s66", s)]))

    def test_a_profiler_trace_folds_into_the_document_shares_reads(self):
        def kernel(stream, name, smem, dur, cat="kernel"):
            return {"ph": "X", "cat": cat, "name": name, "dur": dur,
                    "args": {"stream": stream, "grid": [132, 1, 1], "block": [256, 1, 1], "shared memory": smem}}
        alone = shares.fold_trace([kernel(7, "gemm", 1024, 10.0), kernel(7, "gemm", 1024, 10.0),
                                   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "dur": 50.0}], {})
        run = shares.fold_trace([kernel(7, "gemm", 1024, 10.0), kernel(31, "gemm", 40000, 30.0, cat="Kernel")], {})
        doc = json.loads(json.dumps(shares.document(alone, run, 1)))  # as be_train.py writes it
        self.assertEqual(doc["alone"][0]["launches"], 2, "CPU ops are left out")
        c = shares.classify(doc)["classes"]
        self.assertEqual(c["none"]["launches"], 1)
        self.assertEqual(c["both"]["launches"], 1)
        self.assertAlmostEqual(c["both"]["time_share"], 0.75)

    def test_summarize_finds_the_profiled_runs_and_keeps_them_out_of_the_schemes(self):
        with tempfile.TemporaryDirectory() as out:
            base = LegacyLayoutTest().make(out)
            write(os.path.join(base, "shares_concord-orion-s66", "kernels.json"), self.doc())
            found = summarize.profiled_shares(out)
            self.assertEqual([(c, s) for c, s, _ in found], [(os.path.basename(base), "concord-orion-s66")])
            self.assertFalse(any(r["scheme"].startswith("shares_") for r in summarize.rows_of(out)))


if __name__ == "__main__":
    unittest.main()
