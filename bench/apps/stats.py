"""The statistics of bench/apps' tables (standard library only: no PyTorch, no numpy).

A point (one scheme at one load) is measured in R rounds; each round gives one phase of LC request
latencies and the BE job's iteration ends over that phase's window. Its figures are pooled over the
rounds, and each comes with a 95% bootstrap interval:

- LC p50 and p99: the requests resampled within each round (the round's request count kept), in
  moving blocks of `block` consecutive requests (shorter in a round of fewer than 5 blocks), since
  a request's queueing delay carries into the next one's; the pooled resample's percentile by
  nearest rank.
- LC p99 over alone: the same resampling of the scheme's and of the alone phases (the LC alone,
  measured again in every round), independently; each replicate is the scheme's pooled p99 over
  alone's pooled p99 (pooled, not paired by round; the per-round ratios are kept beside, so a round
  that disagrees shows).
- BE rate: the iterations that ended within the LC phases' windows over their summed durations;
  each round's iteration times resampled in moving blocks of `BE_BLOCK` iterations; each
  replicate is the resample's count over its summed time.

Two points are compared by their intervals: "beats" when they separate in the better direction
(lower LC p99, higher BE rate), "loses" when they separate in the worse one, "within noise"
otherwise; on both axes together: "dominates" (beats on both), "dominated" (loses on both),
"trade-off" (beats on one, loses on the other), "within noise" (every other case). Every
resampling draws from random.Random(seed): the same inputs give the same intervals.
"""
import itertools
import math
import random

LEVEL = 0.95
RESAMPLES = 2000
BLOCK = 10
BE_BLOCK = 5
# A p99 rests on the samples above it: fewer than this many and a point is "too few samples".
MIN_ABOVE_P99 = 20
# Blocks per round a moving-block resample keeps at least (shorter blocks for short rounds).
MIN_BLOCKS = 5
# Samples that come in clusters (an LLM request's tokens) carry about one cluster's worth of
# information each: a per-token p99 needs this many requests besides MIN_ABOVE_P99 tokens above it.
MIN_CLUSTERS = 20


def percentile(values, p):
    """The p-th percentile of `values` by nearest rank (nan when empty)."""
    s = sorted(values)
    if not s:
        return float("nan")
    return _rank(s, p)


def _rank(sorted_values, p):
    n = len(sorted_values)
    return sorted_values[min(n - 1, max(0, int(round(p / 100.0 * (n - 1)))))]


def enough_for(p, n, above=MIN_ABOVE_P99):
    """Whether n samples leave at least `above` of them above the p-th percentile."""
    return n * (1.0 - p / 100.0) >= above - 1e-9


def enough_clustered(p, clusters):
    """Whether clustered samples (a list of clusters) leave MIN_ABOVE_P99 samples above the p-th
    percentile and come from at least MIN_CLUSTERS clusters."""
    return len(clusters) >= MIN_CLUSTERS and enough_for(p, sum(len(c) for c in clusters))


def interval(replicates, level=LEVEL):
    """The percentile interval of bootstrap replicates (nan-free), as (lo, hi)."""
    s = sorted(x for x in replicates if not math.isnan(x))
    if not s:
        return (float("nan"), float("nan"))
    a = (1.0 - level) / 2.0
    return (_rank(s, 100.0 * a), _rank(s, 100.0 * (1.0 - a)))


def _block_resample(values, block, rng):
    """One moving-block resample of `values` with as many items (blocks wrap around the end). A
    round holds at least MIN_BLOCKS blocks: a block as long as the round would resample it as a
    rotation of itself, the same percentiles every time (an interval of zero width)."""
    n = len(values)
    if n == 0:
        return []
    b = max(1, min(block, n // MIN_BLOCKS))
    if b == 1:
        return rng.choices(values, k=n)
    doubled = values + values[:b - 1]
    starts = rng.choices(range(n), k=-(-n // b))
    out = list(itertools.chain.from_iterable(map(doubled.__getitem__, [slice(i, i + b) for i in starts])))
    del out[n:]
    return out


def quantile_replicates(rounds, ps=(50, 99), resamples=RESAMPLES, seed=1, block=BLOCK):
    """Bootstrap replicates of the pooled percentiles `ps` of `rounds` (a list of per-round sample
    lists): {p: [replicate, ...]}, `resamples` each, resampled within rounds in moving blocks."""
    rng = random.Random(seed)
    rounds = [list(r) for r in rounds if r]
    out = {p: [] for p in ps}
    if not rounds:
        return {p: [float("nan")] for p in ps}
    for _ in range(resamples):
        pooled = []
        for r in rounds:
            pooled.extend(_block_resample(r, block, rng))
        pooled.sort()
        for p in ps:
            out[p].append(_rank(pooled, p))
    return out


def cluster_quantile_replicates(rounds, ps=(50, 99), resamples=RESAMPLES, seed=1):
    """As quantile_replicates(), for samples that come in clusters (an LLM request's per-token
    times): `rounds` is a list of rounds, each a list of clusters; whole clusters are resampled
    within each round, so the tokens of one request stay together."""
    rng = random.Random(seed)
    rounds = [[c for c in r if c] for r in rounds]
    rounds = [r for r in rounds if r]
    out = {p: [] for p in ps}
    if not rounds:
        return {p: [float("nan")] for p in ps}
    for _ in range(resamples):
        pooled = []
        for r in rounds:
            for c in rng.choices(r, k=len(r)):
                pooled.extend(c)
        pooled.sort()
        for p in ps:
            out[p].append(_rank(pooled, p))
    return out


def ratio_replicates(num, den):
    """Replicate-wise num / den of two independent replicate lists of equal length."""
    return [a / b if b else float("nan") for a, b in zip(num, den)]


def iteration_times(ends, window):
    """The durations of the BE iterations that ended within the window [lo, hi]: each from the
    previous iteration's end (which may lie before the window) to its own."""
    lo, hi = window
    return [b - a for a, b in zip(ends, ends[1:]) if lo <= b <= hi and b > a]


def rate(rounds_times):
    """Iterations per second: every round's iterations over their summed durations."""
    n = sum(len(r) for r in rounds_times)
    s = sum(sum(r) for r in rounds_times)
    return n / s if s > 0 else float("nan")


def rate_replicates(rounds_times, resamples=RESAMPLES, seed=1, block=BE_BLOCK):
    """Bootstrap replicates of rate(): each round's iteration times resampled in moving blocks of
    `block` iterations (an iteration slowed by the LC's work tends to have slowed neighbours)."""
    rng = random.Random(seed)
    rounds_times = [list(r) for r in rounds_times if r]
    if not rounds_times:
        return [float("nan")]
    out = []
    for _ in range(resamples):
        n = s = 0.0
        for r in rounds_times:
            x = _block_resample(r, block, rng)
            n += len(x)
            s += sum(x)
        out.append(n / s if s > 0 else float("nan"))
    return out


def estimate(value, replicates, level=LEVEL):
    """{"value", "lo", "hi"}: a figure and its bootstrap interval."""
    lo, hi = interval(replicates, level)
    return {"value": value, "lo": lo, "hi": hi}


def separated(a, b):
    """How interval a stands to interval b: "below", "above" or "overlap" (nan: "overlap")."""
    if any(math.isnan(x) for x in (a["lo"], a["hi"], b["lo"], b["hi"])):
        return "overlap"
    if a["hi"] < b["lo"]:
        return "below"
    if a["lo"] > b["hi"]:
        return "above"
    return "overlap"


def axis_verdict(ours, theirs, lower_is_better):
    """"beats", "loses" or "within noise": `ours` against `theirs` on one axis, by their intervals."""
    s = separated(ours, theirs)
    if s == "overlap":
        return "within noise"
    better = (s == "below") == lower_is_better
    return "beats" if better else "loses"


def dominance(lc, be):
    """Both axes' verdicts (LC tail, BE rate) as one: dominates, dominated, trade-off, within noise."""
    if lc == be == "beats":
        return "dominates"
    if lc == be == "loses":
        return "dominated"
    if {lc, be} == {"beats", "loses"}:
        return "trade-off"
    return "within noise"


def against_target(est, target, lower_is_better=True):
    """"met", "missed" or "within noise": an interval against a fixed target."""
    if math.isnan(est["lo"]) or math.isnan(est["hi"]):
        return "within noise"
    if lower_is_better:
        return "met" if est["hi"] <= target else ("missed" if est["lo"] > target else "within noise")
    return "met" if est["lo"] >= target else ("missed" if est["hi"] < target else "within noise")
