"""stats.py on synthetic samples whose answers are known: the intervals cover the true percentile
and rate at about their stated rate, block resampling widens them where the samples are
correlated, clusters stay whole, and the verdicts follow from whether intervals separate."""
import math
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stats  # noqa: E402

Z99 = 2.3263478740408408  # the standard normal's 99th percentile


def covers(est, truth):
    return est["lo"] <= truth <= est["hi"]


class PercentileTest(unittest.TestCase):
    def test_nearest_rank(self):
        xs = list(range(1, 101))  # 1..100
        self.assertEqual(stats.percentile(xs, 50), 51)  # round(0.5 * 99) = 50 (index)
        self.assertEqual(stats.percentile(xs, 99), 99)
        self.assertEqual(stats.percentile(xs, 100), 100)
        self.assertEqual(stats.percentile([3.0], 99), 3.0)
        self.assertTrue(math.isnan(stats.percentile([], 50)))

    def test_enough_samples_above_the_p99(self):
        self.assertTrue(stats.enough_for(99, 2000))
        self.assertFalse(stats.enough_for(99, 1999))
        self.assertTrue(stats.enough_for(50, 40))


class CoverageTest(unittest.TestCase):
    """Across seeds a 95% interval holds the true value in about 95% of them: here at least 85%
    (the binomial spread of the trial counts below leaves 95% within about ±6 points)."""

    def test_exponential_median_and_p90(self):
        trials, hits50, hits90 = 40, 0, 0
        for seed in range(trials):
            rng = random.Random(seed)
            rounds = [[rng.expovariate(1.0) for _ in range(150)] for _ in range(3)]
            reps = stats.quantile_replicates(rounds, (50, 90), resamples=200, seed=seed, block=1)
            pooled = [x for r in rounds for x in r]
            hits50 += covers(stats.estimate(stats.percentile(pooled, 50), reps[50]), math.log(2))
            hits90 += covers(stats.estimate(stats.percentile(pooled, 90), reps[90]), math.log(10))
        self.assertGreaterEqual(hits50, 0.85 * trials)
        self.assertGreaterEqual(hits90, 0.85 * trials)
        # Not vacuous: the intervals are not so wide that they would cover anything.
        self.assertLess(hits90, trials + 1)

    def test_lognormal_p99_from_2000_requests(self):
        mu, sigma = math.log(5e-3), 0.5
        truth = math.exp(mu + sigma * Z99)
        trials, hits, widths = 20, 0, []
        for seed in range(trials):
            rng = random.Random(1000 + seed)
            rounds = [[rng.lognormvariate(mu, sigma) for _ in range(667)] for _ in range(3)]
            pooled = [x for r in rounds for x in r]
            e = stats.estimate(stats.percentile(pooled, 99), stats.quantile_replicates(rounds, (99,), 150, seed)[99])
            hits += covers(e, truth)
            widths.append((e["hi"] - e["lo"]) / truth)
        self.assertGreaterEqual(hits, 16)  # of 20: about 95% with room for the binomial spread
        # 20 samples above the p99 pin it to about ±10-15%, not ±50%.
        self.assertLess(sorted(widths)[len(widths) // 2], 0.35)
        self.assertGreater(min(widths), 0.02)

    def test_a_ratio_of_two_samples_from_one_distribution_holds_one(self):
        hits = 0
        for seed in range(30):
            rng = random.Random(seed)
            a = [[rng.lognormvariate(0, 0.4) for _ in range(400)]]
            b = [[rng.lognormvariate(0, 0.4) for _ in range(400)]]
            ra = stats.quantile_replicates(a, (99,), 200, seed)[99]
            rb = stats.quantile_replicates(b, (99,), 200, seed + 7)[99]
            value = stats.percentile(a[0], 99) / stats.percentile(b[0], 99)
            hits += covers(stats.estimate(value, stats.ratio_replicates(ra, rb)), 1.0)
        self.assertGreaterEqual(hits, 26)

    def test_the_ratio_of_a_doubled_sample_holds_two_and_not_one(self):
        rng = random.Random(5)
        a = [[2 * rng.expovariate(1.0) for _ in range(2000)]]
        b = [[rng.expovariate(1.0) for _ in range(2000)]]
        ra = stats.quantile_replicates(a, (99,), 300, 1)[99]
        rb = stats.quantile_replicates(b, (99,), 300, 2)[99]
        e = stats.estimate(stats.percentile(a[0], 99) / stats.percentile(b[0], 99), stats.ratio_replicates(ra, rb))
        self.assertTrue(covers(e, 2.0), e)
        self.assertGreater(e["lo"], 1.2)


class BlockTest(unittest.TestCase):
    def test_blocks_widen_the_interval_of_correlated_samples(self):
        # AR(1) with coefficient 0.9: neighbours carry each other's value, as queueing delays do.
        rng = random.Random(3)
        x, xs = 0.0, []
        for _ in range(1500):
            x = 0.9 * x + rng.gauss(0, 1)
            xs.append(x)
        iid = stats.interval(stats.quantile_replicates([xs], (50,), 300, 1, block=1)[50])
        blocked = stats.interval(stats.quantile_replicates([xs], (50,), 300, 1, block=40)[50])
        self.assertGreater(blocked[1] - blocked[0], 1.8 * (iid[1] - iid[0]))

    def test_a_block_resample_keeps_the_round_sizes(self):
        rng = random.Random(1)
        for n, b in ((7, 3), (10, 10), (5, 20), (1, 4)):
            out = stats._block_resample(list(range(n)), b, rng)
            self.assertEqual(len(out), n)
            self.assertTrue(set(out) <= set(range(n)))

    def test_a_round_shorter_than_its_blocks_still_varies(self):
        # 5 requests in a round with blocks of 10: one block would only rotate the round, every
        # replicate the same p99 (a zero-width interval that would separate from anything).
        rounds = [[0.5, 0.6, 0.7, 1.2, 0.55], [0.5, 0.9, 0.6, 0.65, 0.7]]
        lo, hi = stats.interval(stats.quantile_replicates(rounds, (99,), 200, 1)[99])
        self.assertLess(lo, hi)

    def test_the_same_seed_gives_the_same_intervals(self):
        rounds = [[random.Random(i).random() for i in range(300)]]
        a = stats.quantile_replicates(rounds, (99,), 50, seed=4)
        self.assertEqual(a, stats.quantile_replicates(rounds, (99,), 50, seed=4))
        self.assertNotEqual(a, stats.quantile_replicates(rounds, (99,), 50, seed=5))


class ClusterTest(unittest.TestCase):
    def test_clusters_stay_whole(self):
        # Two kinds of request: all of one's tokens at 1, all of the other's at 100. A resample of
        # whole requests holds a multiple of 4 tokens of each kind.
        rounds = [[[1.0] * 4, [100.0] * 4, [1.0] * 4]]
        rng_reps = stats.cluster_quantile_replicates(rounds, (50,), 200, 1)
        self.assertTrue(set(rng_reps[50]) <= {1.0, 100.0})
        self.assertIn(100.0, rng_reps[50])  # two or three slow requests of three happen

    def test_a_request_whose_tokens_move_together_counts_once(self):
        # Every token of a request takes its request's value: 40 requests carry 40 values' worth of
        # information, not 1280; the interval is as wide as 40 samples make it.
        rng = random.Random(4)
        requests = [[rng.expovariate(1.0)] * 32 for _ in range(40)]
        clustered = stats.interval(stats.cluster_quantile_replicates([requests], (90,), 200, 1)[90])
        tokens = stats.interval(stats.quantile_replicates([[x for r in requests for x in r]], (90,), 200, 1, block=1)[90])
        self.assertGreater(clustered[1] - clustered[0], 2 * (tokens[1] - tokens[0]))

    def test_enough_clustered_samples_need_enough_clusters(self):
        self.assertTrue(stats.enough_clustered(99, [[0.0] * 100] * 20))
        self.assertFalse(stats.enough_clustered(99, [[0.0] * 128] * 14), "1,792 tokens of 14 requests")
        self.assertFalse(stats.enough_clustered(99, [[0.0] * 1000] * 10), "10,000 tokens of 10 requests")

    def test_cluster_p99_covers_the_truth(self):
        truth = math.log(100)  # exponential(1): the 99th percentile
        hits = 0
        for seed in range(16):
            rng = random.Random(seed)
            rounds = [[[rng.expovariate(1.0) for _ in range(32)] for _ in range(40)] for _ in range(2)]
            flat = [x for r in rounds for c in r for x in c]
            e = stats.estimate(stats.percentile(flat, 99), stats.cluster_quantile_replicates(rounds, (99,), 150, seed)[99])
            hits += covers(e, truth)
        self.assertGreaterEqual(hits, 13)


class RateTest(unittest.TestCase):
    def test_iteration_times_inside_a_window(self):
        ends = [0.0, 1.0, 2.5, 3.0, 6.0]
        self.assertEqual(stats.iteration_times(ends, (1.0, 3.0)), [1.0, 1.5, 0.5])
        self.assertAlmostEqual(stats.rate([stats.iteration_times(ends, (1.0, 3.0))]), 1.0)
        self.assertEqual(stats.iteration_times(ends, (7.0, 9.0)), [])
        self.assertTrue(math.isnan(stats.rate([[]])))

    def test_the_rate_interval_covers_the_true_rate(self):
        hits, trials = 0, 30
        for seed in range(trials):
            rng = random.Random(seed)
            rounds = []
            for _ in range(3):
                t, ends = 0.0, [0.0]
                while t < 8.0:
                    t += rng.gauss(0.025, 0.005)  # 40 iterations per second
                    ends.append(t)
                rounds.append(stats.iteration_times(ends, (0.0, 8.0)))
            e = stats.estimate(stats.rate(rounds), stats.rate_replicates(rounds, 150, seed))
            hits += covers(e, 40.0)
        self.assertGreaterEqual(hits, 25)

    def test_a_slower_job_is_told_apart(self):
        rng = random.Random(2)
        fast = [[rng.gauss(0.025, 0.003) for _ in range(300)]]
        slow = [[rng.gauss(0.030, 0.003) for _ in range(300)]]
        f = stats.estimate(stats.rate(fast), stats.rate_replicates(fast, 200, 1))
        s = stats.estimate(stats.rate(slow), stats.rate_replicates(slow, 200, 2))
        self.assertEqual(stats.axis_verdict(f, s, lower_is_better=False), "beats")
        self.assertEqual(stats.axis_verdict(s, f, lower_is_better=False), "loses")


class VerdictTest(unittest.TestCase):
    def est(self, lo, hi):
        return {"value": (lo + hi) / 2, "lo": lo, "hi": hi}

    def test_separation(self):
        low, high, mid = self.est(1, 2), self.est(3, 4), self.est(1.5, 3.5)
        self.assertEqual(stats.separated(low, high), "below")
        self.assertEqual(stats.separated(high, low), "above")
        self.assertEqual(stats.separated(low, mid), "overlap")
        self.assertEqual(stats.separated(low, self.est(2, 3)), "overlap", "touching intervals do not separate")
        self.assertEqual(stats.separated(low, {"value": 1, "lo": float("nan"), "hi": 1}), "overlap")

    def test_axis_and_dominance(self):
        low, high, mid = self.est(1, 2), self.est(3, 4), self.est(1.5, 3.5)
        self.assertEqual(stats.axis_verdict(low, high, lower_is_better=True), "beats")
        self.assertEqual(stats.axis_verdict(low, high, lower_is_better=False), "loses")
        self.assertEqual(stats.axis_verdict(mid, high, lower_is_better=True), "within noise")
        self.assertEqual(stats.dominance("beats", "beats"), "dominates")
        self.assertEqual(stats.dominance("loses", "loses"), "dominated")
        self.assertEqual(stats.dominance("beats", "loses"), "trade-off")
        self.assertEqual(stats.dominance("loses", "beats"), "trade-off")
        self.assertEqual(stats.dominance("beats", "within noise"), "within noise")
        self.assertEqual(stats.dominance("within noise", "within noise"), "within noise")

    def test_targets(self):
        self.assertEqual(stats.against_target(self.est(1.0, 1.1), 1.15), "met")
        self.assertEqual(stats.against_target(self.est(1.2, 1.4), 1.15), "missed")
        self.assertEqual(stats.against_target(self.est(1.1, 1.3), 1.15), "within noise")
        self.assertEqual(stats.against_target(self.est(0.7, 0.8), 0.65, lower_is_better=False), "met")
        self.assertEqual(stats.against_target(self.est(0.4, 0.6), 0.65, lower_is_better=False), "missed")

    def test_samples_from_far_apart_distributions_separate_and_from_one_do_not(self):
        rng = random.Random(9)
        a = [[rng.lognormvariate(0, 0.3) for _ in range(2000)]]
        b = [[2 * rng.lognormvariate(0, 0.3) for _ in range(2000)]]
        c = [[rng.lognormvariate(0, 0.3) for _ in range(2000)]]
        ea, eb, ec = (stats.estimate(stats.percentile(x[0], 99), stats.quantile_replicates(x, (99,), 200, i)[99])
                      for i, x in enumerate((a, b, c)))
        self.assertEqual(stats.axis_verdict(ea, eb, lower_is_better=True), "beats")
        self.assertEqual(stats.axis_verdict(ea, ec, lower_is_better=True), "within noise")


if __name__ == "__main__":
    unittest.main()
