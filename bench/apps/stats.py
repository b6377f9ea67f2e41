"""Small statistics shared by bench/apps' scripts (no PyTorch here, so the tables need none)."""


def percentile(values, p):
    """The p-th percentile of `values` by nearest rank (nan when empty)."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]
