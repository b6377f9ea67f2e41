#!/usr/bin/env python3
"""An LC tenant that keeps its work-in-flight flag up: matrix products back to back (under
LD_PRELOAD=libconcord_intercept.so with CONCORD_CLASS=lc), so that BE leases that yield to it apply
their room terms or gates. Creates READY after its first products, stops when STOP exists.

  lc_busy.py READY STOP
"""
import os
import sys

import torch

ready, stop = sys.argv[1], sys.argv[2]
x = torch.randn(4096, 4096, device="cuda")
for _ in range(4):
    y = x @ x
torch.cuda.synchronize()
open(ready, "w").close()
while not os.path.exists(stop):
    for _ in range(8):
        y = x @ x
    torch.cuda.synchronize()
