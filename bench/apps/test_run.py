"""run.py's rounds on stand-ins (CPU; no PyTorch, no GPU, no MPS): PYTHON points at a stand-in that
plays lc_service.py, be_train.py and prio_streams.py by control.py's protocol, and stand-ins of
nvidia-smi, nvidia-cuda-mps-control and concordd sit first on the PATH. The test checks what run.py
starts for each scheme (the BE's MPS settings, concordd's policy, the pinning), that the schemes
run interleaved round by round with the LC alone again in every round, that a rerun keeps what is
on disk, that --deadline-s stops before a job that would not fit, and that summarize.py reads the
result."""
import json
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import summarize  # noqa: E402

FAKE_PY = textwrap.dedent("""\
    #!{python}
    # Plays lc_service.py / be_train.py / prio_streams.py --serve DIR by control.py's protocol.
    import json, os, random, sys, time
    sys.path.insert(0, {here!r})
    import control
    script, args = os.path.basename(sys.argv[1]), sys.argv[2:]
    folder = args[args.index("--serve") + 1]
    env = {{k: os.environ.get(k) for k in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_CLIENT_PRIORITY",
                                          "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "LD_PRELOAD", "CONCORD_CLASS", "CONCORD_SOCKET")}}
    info = {{"script": script, "env": env, "cpus": sorted(os.sched_getaffinity(0)), "graph": "--graph" in args}}
    srv = control.Server(folder)

    def phases(job):
        out = []
        rng = random.Random(job["seed"])
        for rate, n in zip(job["rates"], job["requests"]):
            t0 = time.monotonic()
            arrivals = [t0 + i / rate for i in range(n)]
            lat = [0.002 + 0.001 * rng.random() for _ in range(n)]
            time.sleep(max(0.0, arrivals[-1] + lat[-1] - time.monotonic()))
            out.append({{"rate_rps": rate, "arrivals": arrivals, "latency_s": lat, "window": [arrivals[0], arrivals[-1] + lat[-1]]}})
        return out

    srv.ready(info)
    ends = []
    while (job := srv.next_job()) is not None:
        op = job["op"]
        if op == "calibrate":
            control.write_atomic(job["out"], {{**info, "kind": "calibrate", "mean_s": 0.004, "p99_s": 0.005}})
        elif op == "phases":
            control.write_atomic(job["out"], {{**info, "kind": "open_loop", "phases": phases(job), **job["extra"]}})
        elif op == "train":
            ends = []
            srv.done(job)
            while not srv.pending():
                time.sleep(0.002)
                ends.append(time.monotonic())
            continue
        elif op == "pause":
            control.write_atomic(job["out"], {{**info, "iteration_ends": ends}})
        elif op == "trace":
            control.write_atomic(job["out"], {{**info, "kind": "trace", "requests": job["requests"]}})
        elif op == "pair":
            t = time.monotonic()
            ph = phases(job)
            control.write_atomic(job["out_lc"], {{**info, "kind": "open_loop", "phases": ph, "alone_ref": "alone"}})
            k = int((time.monotonic() - t) / 0.002)
            control.write_atomic(job["out_be"], {{**info, "iteration_ends": [t + 0.002 * i for i in range(k)]}})
        srv.done(job)
""")

FAKE_CONCORDD = textwrap.dedent("""\
    #!{python}
    # concordd's stand-in: records its arguments, makes its sockets, serves empty metrics.
    import json, os, signal, socket, sys, threading
    args = sys.argv[1:]
    print(json.dumps({{"event": "started", "argv": args, "cpus": sorted(os.sched_getaffinity(0))}}), flush=True)
    sock = socket.socket(socket.AF_UNIX); sock.bind(args[args.index("--socket") + 1]); sock.listen()
    metrics = socket.socket(socket.AF_UNIX); metrics.bind(args[args.index("--metrics-socket") + 1]); metrics.listen()
    def serve():
        while True:
            c, _ = metrics.accept(); c.recv(1024)
            c.sendall(b"HTTP/1.0 200 OK\\r\\n\\r\\nconcord_tenant_gpu_bound_share{{tenant=\\"2\\",class=\\"lc\\"}} 0.25\\n"); c.close()
    threading.Thread(target=serve, daemon=True).start()
    signal.sigwait([signal.SIGTERM])
""")

FAKE_SMI = """#!/bin/sh
case "$*" in
  *-lms*) while true; do echo "2026/12/01 00:00:00.000, 1980 MHz, 3201 MHz, 300 W, 50 %, 40"; sleep 0.2; done ;;
  *) echo "NVIDIA H200" ;;
esac
"""

FAKE_MPS = "#!/bin/sh\ncat >/dev/null 2>&1 &\nexit 0\n"


def executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class RunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        bin_dir = os.path.join(t, "bin")
        os.makedirs(bin_dir)
        executable(os.path.join(bin_dir, "fakepy"), FAKE_PY.format(python=sys.executable, here=HERE))
        executable(os.path.join(bin_dir, "concordd"), FAKE_CONCORDD.format(python=sys.executable))
        executable(os.path.join(bin_dir, "nvidia-smi"), FAKE_SMI)
        executable(os.path.join(bin_dir, "nvidia-cuda-mps-control"), FAKE_MPS)
        cpus = sorted(os.sched_getaffinity(0))
        cls.lc_cpu, cls.be_cpu = cpus[0], cpus[-1]
        cls.env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"], "PYTHON": os.path.join(bin_dir, "fakepy"),
                   "CONCORDD": os.path.join(bin_dir, "concordd"), "INTERCEPT": os.path.join(t, "libconcord_intercept.so"),
                   "PYTHONDONTWRITEBYTECODE": "1"}
        cls.schemes = "timeslice,priority-streams,mps,mps-prio,mps-prio-be50,concord,concord:orion,concord@free"
        cls.out = os.path.join(t, "out")
        cls.first = cls.run_py(cls.out, "--rounds", "2", "--trace-schemes", "mps")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def run_py(cls, out, *extra):
        cmd = [sys.executable, os.path.join(HERE, "run.py"), out, "--combos", "bert:32:graph/bert:16", "--schemes", cls.schemes,
               "--requests", "10", "--lead-s", "0.05", "--be-alone-s", "0.3", "--lc-cpus", str(cls.lc_cpu),
               "--be-cpus", str(cls.be_cpu), "--sys-cpus", str(cls.lc_cpu), *extra]
        return subprocess.run(cmd, env=cls.env, capture_output=True, text=True, timeout=120)

    def doc(self, *parts):
        with open(os.path.join(self.out, "bert-32-graph__bert-16", *parts)) as f:
            return json.load(f)

    def test_every_round_holds_the_alones_and_every_scheme(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr)
        for k in (1, 2):
            for entry in ("alone", "alone-mps"):
                self.assertEqual(len(self.doc(f"round{k}", entry, "lc.json")["phases"]), 2)
            for entry in ("be-alone", "be-alone-mps"):
                be = self.doc(f"round{k}", entry, "be.json")
                lo, hi = be["window"]
                self.assertGreater(sum(1 for t in be["iteration_ends"] if lo <= t <= hi), 5)
            for s in ("timeslice", "priority-streams", "mps", "mps-prio", "mps-prio-be50", "concord", "concord-orion"):
                self.assertEqual(len(self.doc(f"round{k}", s, "lc.json")["phases"]), 2, s)
                self.assertTrue(self.doc(f"round{k}", s, "be.json")["iteration_ends"], s)
        settings = self.doc("settings.json")
        self.assertEqual(settings["requests"], [10, 10])
        self.assertAlmostEqual(settings["rates_rps"][0], 0.3 / 0.004)
        self.assertEqual(len(settings["targets_ms"]), 2)

    def test_each_scheme_gets_its_own_settings(self):
        env = lambda s: self.doc("round1", s, "be.json")["env"]  # noqa: E731
        self.assertIsNone(env("timeslice")["CUDA_MPS_PIPE_DIRECTORY"], "time slicing runs without MPS")
        self.assertIsNone(env("mps")["CUDA_MPS_CLIENT_PRIORITY"])
        self.assertEqual(env("mps-prio")["CUDA_MPS_CLIENT_PRIORITY"], "1")
        self.assertIsNone(env("mps-prio")["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"])
        self.assertEqual(env("mps-prio-be50")["CUDA_MPS_CLIENT_PRIORITY"], "1")
        self.assertEqual(env("mps-prio-be50")["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50")
        self.assertEqual(env("concord")["CONCORD_CLASS"], "be")
        lc = self.doc("round1", "concord", "lc.json")["env"]
        self.assertEqual(lc["CONCORD_CLASS"], "lc")
        self.assertIsNone(self.doc("round1", "mps", "lc.json")["env"]["CONCORD_CLASS"], "the MPS schemes' LC runs without the library")
        self.assertEqual(self.doc("round1", "mps", "lc.json")["alone_ref"], "alone-mps")
        self.assertEqual(self.doc("round1", "timeslice", "lc.json")["alone_ref"], "alone")
        # Pinned: the LC to its CPUs, the BE to its own.
        self.assertEqual(self.doc("round1", "mps", "lc.json")["cpus"], [self.lc_cpu])
        self.assertEqual(self.doc("round1", "mps", "be.json")["cpus"], [self.be_cpu])

    def test_concord_is_the_daemon_as_a_user_starts_it(self):
        def started(scheme):
            with open(os.path.join(self.out, "bert-32-graph__bert-16", "round1", scheme, "concordd.log")) as f:
                return json.loads(f.readline())
        self.assertNotIn("--policy", started("concord")["argv"])
        a = started("concord-orion")["argv"]
        self.assertEqual(a[a.index("--policy") + 1], "orion")
        self.assertNotIn("--policy", started("concord@free")["argv"])
        self.assertEqual(started("concord")["cpus"], [self.lc_cpu], "the daemon on the system CPUs")
        self.assertEqual(started("concord@free")["cpus"], sorted(os.sched_getaffinity(0)), "@free: every CPU")
        with open(os.path.join(self.out, "bert-32-graph__bert-16", "round1", "concord", "metrics.jsonl")) as f:
            samples = [json.loads(x) for x in f]
        self.assertTrue(samples and samples[0]["share"] == 0.25, "the daemon's metrics are sampled during the job")

    def test_the_trace_comes_after_every_measured_job_of_its_group(self):
        base = os.path.join(self.out, "bert-32-graph__bert-16")
        trace = os.path.join(base, "round1", "mps", "trace.json")
        self.assertTrue(os.path.exists(trace))
        self.assertFalse(os.path.exists(os.path.join(base, "round2", "mps", "trace.json")), "round 1 only")
        for s in ("mps-prio", "mps-prio-be50", "concord-orion"):
            self.assertGreater(os.stat(trace).st_mtime_ns, os.stat(os.path.join(base, "round1", s, "lc.json")).st_mtime_ns, s)

    def test_rounds_interleave(self):
        def start(k, s):
            return self.doc(f"round{k}", s, "lc.json")["phases"][0]["window"][0]
        order = sorted((start(k, s), k, s) for k in (1, 2) for s in ("alone", "timeslice", "alone-mps", "mps", "concord"))
        self.assertEqual([(k, s) for _, k, s in order],
                         [(1, "alone-mps"), (1, "mps"), (1, "concord"), (1, "alone"), (1, "timeslice"),
                          (2, "alone-mps"), (2, "mps"), (2, "concord"), (2, "alone"), (2, "timeslice")])

    def test_a_rerun_keeps_what_is_there_and_summarize_reads_it(self):
        lc = os.path.join(self.out, "bert-32-graph__bert-16", "round1", "mps", "lc.json")
        before = os.stat(lc).st_mtime_ns
        again = self.run_py(self.out, "--rounds", "2", "--trace-schemes", "mps")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(os.stat(lc).st_mtime_ns, before)
        self.assertNotIn("warm in", again.stderr, "nothing left to run: no process started")
        rows = summarize.rows_of(self.out, resamples=20)
        mps = next(r for r in rows if r["scheme"] == "mps" and r["load"] == 0.3)
        self.assertEqual(mps["rounds"], 2)
        self.assertEqual(mps["requests"], 20)
        self.assertEqual(mps["alone_ref"], "alone-mps")
        self.assertIn("concord", {v["default"] for v in summarize.verdicts(rows)})
        self.assertNotIn("logs", {r["scheme"] for r in rows}, "the processes' logs are no scheme")

    def test_a_deadline_stops_before_a_job_that_would_not_fit(self):
        # 3,000 requests per phase at 75 and 150 per second: a minute per LC job, more than is left.
        out = os.path.join(self.tmp.name, "short")
        r = self.run_py(out, "--rounds", "1", "--deadline-s", "60", "--requests", "3000")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "bert-32-graph__bert-16", "skipped.txt")) as f:
            skipped = f.read().split("\n")
        self.assertIn("round 1 alone-mps", skipped)
        self.assertIn("round 1 timeslice", skipped)
        base = os.path.join(out, "bert-32-graph__bert-16")
        self.assertTrue(os.path.exists(os.path.join(base, "calibrate.json")))
        # Nothing after the first job that does not fit, not even one that would: rounds stay whole.
        self.assertFalse(os.path.exists(os.path.join(base, "round1", "be-alone-mps", "be.json")))
        self.assertFalse(os.path.exists(os.path.join(base, "round1", "alone-mps", "lc.json")))


if __name__ == "__main__":
    unittest.main()
