#!/usr/bin/env python3
"""`concord doctor` on nodes built in a scratch folder: a healthy one, and broken ones, each of
which it must find and name the fix for.

  doctor_test.py CONCORD CONCORDD LIBRARY STANDIN_LIBCUDA STANDIN_APP

The node: the stand-in libcuda.so.1 (tests/standin) as the driver, the build's
libconcord_intercept.so, a concordd on a socket in the scratch folder, and MPS faked by what
doctor looks for (a process whose argv[0] is nvidia-cuda-mps-control and a FIFO named `control`
in the pipe directory: no MPS runs in CI). Cases that run doctor as another user (nobody) skip
unless run as root.
"""
import grp
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

CONCORD = CONCORDD = LIBRARY = LIBCUDA = APP = None
LINE = re.compile(r"^(ok|PROBLEM|skip)\s+(\w+)\s+(.*)$")
FIX = re.compile(r"^\s+fix: (.*)$")


def parse(stdout):
    """{check: (verdict, what, fix)} from doctor's output."""
    found, last = {}, None
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            last = m.group(2)
            found[last] = [m.group(1), m.group(3), ""]
            continue
        m = FIX.match(line)
        if m and last:
            found[last][2] = m.group(1)
    return found


class Node:
    """A scratch node: its folder, its processes, and doctor's flags for it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="concord-doctor-test-")
        os.chmod(self.dir, 0o755)  # a user other than root reaches what is in it
        self.procs = []
        self.socket = os.path.join(self.dir, "concordd.sock")
        self.metrics = os.path.join(self.dir, "metrics.sock")
        self.mps = os.path.join(self.dir, "mps")
        self.driver_root = self.mkdir("driver")
        self.proc_root = "/proc"

    def mkdir(self, name):
        path = os.path.join(self.dir, name)
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o755)
        return path

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def spawn(self, argv, **kw):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
        self.procs.append(p)
        return p

    def fake_mps(self):
        os.makedirs(self.mps, exist_ok=True)
        os.chmod(self.mps, 0o755)
        os.mkfifo(os.path.join(self.mps, "control"), 0o666)
        os.chmod(os.path.join(self.mps, "control"), 0o666)
        self.spawn(["bash", "-c", "exec -a nvidia-cuda-mps-control sleep 300"])

    def start_daemon(self, *extra, driver_root=None):
        args = [CONCORDD, "--socket", self.socket, "--metrics-socket", self.metrics, "--driver-root",
                driver_root or self.mkdir("daemon-driver"), "--device-spec", "h100", "--log-level", "warn", *extra]
        d = self.spawn(args)
        for _ in range(200):
            if os.path.exists(self.socket):
                return d
            if d.poll() is not None:
                raise AssertionError(f"concordd exited {d.returncode}: {d.stderr.read().decode()}")
            time.sleep(0.025)
        raise AssertionError("concordd did not make its socket")

    def healthy(self):
        self.fake_mps()
        self.start_daemon()

    def flags(self, **over):
        f = {"--socket": self.socket, "--libcuda": LIBCUDA, "--library": LIBRARY, "--mps-pipe-dir": self.mps,
             "--proc-root": self.proc_root, "--driver-root": self.driver_root,
             "--slurm-conf": os.path.join(self.dir, "slurm", "slurm.conf"), "--test-program": f"{APP} be ms=1000"}
        f.update(over)
        out = []
        for k, v in f.items():
            if v is not None:
                out += [k, v]
        return out

    def doctor(self, *extra, env=None, user=None, **over):
        e = dict(os.environ)
        for k in ("CONCORD_SOCKET", "CUDA_MPS_PIPE_DIRECTORY", "SLURM_CONF", "CONCORD_INTERCEPT_LIB", "LD_PRELOAD"):
            e.pop(k, None)
        e.update(env or {})
        kw = {"user": user, "group": user, "extra_groups": []}  # a uid: nobody's group differs by name if user is not None else {}
        r = subprocess.run([CONCORD, "doctor", *self.flags(**over), *extra], capture_output=True, text=True, env=e,
                           timeout=120, cwd=self.dir, **kw)
        return r, parse(r.stdout)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            if p.stderr:
                p.stderr.close()
        subprocess.run(["rm", "-rf", self.dir])


class Doctor(unittest.TestCase):
    def setUp(self):
        self.node = Node()

    def tearDown(self):
        self.node.close()

    def assertOk(self, found, *checks):
        for c in checks:
            self.assertIn(c, found, f"no line for {c}")
            self.assertEqual(found[c][0], "ok", f"{c}: {found[c]}")

    def assertProblem(self, r, found, check, what, fix):
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(check, found, r.stdout)
        verdict, said, fixed = found[check]
        self.assertEqual(verdict, "PROBLEM", r.stdout)
        self.assertIn(what, said, r.stdout)
        self.assertIn(fix, fixed, r.stdout)
        self.assertRegex(r.stdout.splitlines()[-1], r"^concord doctor: \d+ problems?$")

    def test_a_healthy_node_passes(self):
        n = self.node
        n.healthy()
        preloaded = n.spawn(["sleep", "60"], env=dict(os.environ, LD_PRELOAD=LIBRARY, CONCORD_SOCKET=n.socket))
        for program in (f"{APP} be ms=1000", None):  # the stand-in app, and doctor's own probe
            r, found = n.doctor("--pid", str(preloaded.pid), **{"--test-program": program})
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertOk(found, "driver", "library", "mps", "socket", "daemon", "launches", "process")
            self.assertEqual(found["slurm"][0], "skip", r.stdout)
            self.assertIn("supports CUDA 13.0", found["driver"][1])
            self.assertIn("policy orion", found["daemon"][1])
            self.assertRegex(found["launches"][1], r"which counted [1-9]\d* for tenant \d+ \(concord-doctor\)")
            self.assertIn("every check passed", r.stdout)
        self.assertIn("doctor's probe: 8 launches through the library, 8 posted to concordd, which counted 8", found["launches"][1])

    def test_no_mps(self):
        n = self.node
        n.start_daemon()
        n.proc_root = n.mkdir("no-processes")  # no nvidia-cuda-mps-control, whatever else runs here
        r, found = n.doctor()
        self.assertProblem(r, found, "mps", "no MPS control daemon", "nvidia-cuda-mps-control -d")
        self.assertOk(found, "driver", "library", "socket", "launches")

    def test_an_mps_pipe_left_without_its_daemon(self):
        n = self.node
        n.start_daemon()
        os.makedirs(n.mps)
        os.mkfifo(os.path.join(n.mps, "control"))
        n.proc_root = n.mkdir("no-processes")
        r, found = n.doctor()
        self.assertProblem(r, found, "mps", "left from an MPS control daemon", "nvidia-cuda-mps-control -d")

    def test_an_mps_server_of_another_user(self):
        if os.getuid() != 0:
            self.skipTest("needs root (runs doctor as nobody)")
        n = self.node
        n.start_daemon("--socket-mode", "0666")
        n.fake_mps()
        n.proc_root = n.mkdir("proc")
        n.write("proc/100/cmdline", "nvidia-cuda-mps-control\0-d\0")
        n.write("proc/100/status", "Name:\tnvidia-cuda-mps\nUid:\t0\t0\t0\t0\n")
        n.write("proc/200/cmdline", "nvidia-cuda-mps-server\0")
        n.write("proc/200/status", "Name:\tnvidia-cuda-mps\nUid:\t4321\t4321\t4321\t4321\n")
        r, found = n.doctor(user=65534)
        self.assertProblem(r, found, "mps", "an MPS server runs for uid 4321", "run every tenant as one user")

    def test_the_socket_closed_to_the_user(self):
        if os.getuid() != 0:
            self.skipTest("needs root (runs doctor as nobody)")
        n = self.node
        n.healthy()
        os.chmod(n.socket, 0o600)  # as concordd --socket-mode 0600 makes it
        r, found = n.doctor(user=65534)
        self.assertProblem(r, found, "socket", "nobody may not connect", "--socket-mode 0660")
        self.assertIn("usermod -aG root nobody", found["socket"][2])
        self.assertEqual(found["daemon"][0], "skip", r.stdout)
        self.assertEqual(found["launches"][0], "skip", r.stdout)

    def test_a_user_outside_the_sockets_group(self):
        if os.getuid() != 0:
            self.skipTest("needs root (runs doctor as nobody)")
        n = self.node
        n.fake_mps()
        n.start_daemon("--socket-mode", "0660", "--group", "daemon")
        r, found = n.doctor(user=65534)
        self.assertProblem(r, found, "socket", "nobody is not in group daemon", "usermod -aG daemon nobody")
        self.assertNotIn("--socket-mode", found["socket"][2])

    def test_the_sockets_folder_closed_to_the_user(self):
        # As packaged: /run/concord is the unit's RuntimeDirectory, mode 0750, group concord.
        if os.getuid() != 0:
            self.skipTest("needs root (runs doctor as nobody)")
        n = self.node
        n.fake_mps()
        run = n.mkdir("run")
        n.socket = os.path.join(run, "concordd.sock")
        n.start_daemon("--socket-mode", "0666")
        os.chown(run, 0, grp.getgrnam("daemon").gr_gid)
        os.chmod(run, 0o750)
        r, found = n.doctor(user=65534)
        self.assertProblem(r, found, "socket", f"the folder {run} is closed to it", "usermod -aG daemon nobody")

    def test_the_daemon_down(self):
        n = self.node
        n.fake_mps()
        r, found = n.doctor()  # never started: no socket file
        self.assertProblem(r, found, "socket", "no socket at", "systemctl start concordd")
        self.assertIn(f"mkdir -p {n.dir} && concordd --socket {n.socket} &", found["socket"][2])
        d = n.start_daemon()
        d.kill()  # dies without removing its socket file
        d.wait()
        r, found = n.doctor()
        self.assertProblem(r, found, "socket", "nothing answers on", "systemctl start concordd")
        self.assertEqual(found["daemon"][0], "skip", r.stdout)
        self.assertEqual(found["launches"][0], "skip", r.stdout)

    def test_the_library_missing(self):
        n = self.node
        n.healthy()
        r, found = n.doctor(**{"--library": os.path.join(n.dir, "lib", "libconcord_intercept.so")})
        self.assertProblem(r, found, "library", "is missing", "concord_intercept")
        self.assertEqual(found["launches"][0], "skip", r.stdout)
        n.write("lib/libconcord_intercept.so", "not a library")
        r, found = n.doctor(**{"--library": os.path.join(n.dir, "lib", "libconcord_intercept.so")})
        self.assertProblem(r, found, "library", "not a shared library", "concord_intercept")

    def test_a_mismatched_cuda(self):
        n = self.node
        n.healthy()
        r, found = n.doctor(env={"CONCORD_STANDIN_DRIVER_VERSION": "12040"})
        self.assertProblem(r, found, "driver", "supports CUDA 12.4; libconcord_intercept.so was built for CUDA 13.0",
                           "upgrade the NVIDIA driver to one for CUDA 13.0 or newer")
        self.assertOk(found, "library", "mps", "socket", "daemon")

    def test_no_driver(self):
        n = self.node
        n.healthy()
        r, found = n.doctor(**{"--libcuda": os.path.join(n.dir, "none", "libcuda.so.1"), "--test-program": None})
        self.assertProblem(r, found, "driver", "cannot open", "install the NVIDIA driver")
        self.assertEqual(found["launches"][0], "skip", r.stdout)  # the probe needs a driver

    def test_a_process_that_did_not_preload_the_library(self):
        n = self.node
        n.healthy()
        plain = n.spawn(["sleep", "61"])
        r, found = n.doctor("--pid", str(plain.pid))
        self.assertProblem(r, found, "process", f"process {plain.pid} (sleep) did not preload", "LD_PRELOAD=")
        self.assertIn("sleep 61", found["process"][2])
        self.assertOk(found, "driver", "library", "mps", "socket", "daemon", "launches")

    def test_a_test_program_that_launches_nothing(self):
        n = self.node
        n.healthy()
        r, found = n.doctor(**{"--test-program": "true"})
        self.assertProblem(r, found, "launches", "true", "CONCORD_INTERCEPT_LOG=1")

    def test_a_gpu_the_daemon_does_not_manage(self):
        n = self.node
        n.fake_mps()
        daemon_driver = n.mkdir("daemon-driver")
        node_driver = n.driver_root
        for root, buses in ((daemon_driver, ["0000:19:00.0"]), (node_driver, ["0000:19:00.0", "0000:29:00.0"])):
            for bus in buses:
                n.write(os.path.join(root, "gpus", bus, "information"), "Model: \t\t NVIDIA H200\n")
        n.start_daemon(driver_root=daemon_driver)
        r, found = n.doctor()
        self.assertProblem(r, found, "daemon", "the driver's GPU 0000:29:00.0 is not among them", "--devices all")
        self.assertIn("GPU 0 (0000:19:00.0, H100 SXM)", found["daemon"][1])

    def test_slurms_plugin_line(self):
        n = self.node
        n.healthy()
        conf = n.write("slurm/slurm.conf", "ClusterName=test\n")
        n.write("slurm/plugstack.conf", f"include {n.dir}/slurm/plugstack.conf.d/*.conf\n")
        plugin = n.write("lib/concord_spank.so", "")
        line = f"optional {plugin} socket={n.socket}\n"
        n.write("slurm/plugstack.conf.d/concord.conf", "# the package's line, commented out\n# " + line)
        r, found = n.doctor(**{"--slurm-conf": conf})
        self.assertProblem(r, found, "slurm", "names concord_spank.so only in a comment", "sed -i")
        # The fix, run as printed, makes the line live.
        subprocess.run(["sh", "-c", found["slurm"][2].split(", then")[0]], check=True)
        r, found = n.doctor(**{"--slurm-conf": conf})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertOk(found, "slurm")
        self.assertIn(plugin, found["slurm"][1])
        os.remove(os.path.join(n.dir, "slurm/plugstack.conf"))
        r, found = n.doctor(**{"--slurm-conf": conf})
        self.assertProblem(r, found, "slurm", "has no", "include")

    def test_bad_input(self):
        n = self.node
        for args, said in ((["--pid", "abc"], "--pid"), (["--pid", "0"], "--pid 0: not a process id"),
                           (["--pid", "999999999"], "no such process"), (["--test-program", " "], "--test-program is empty"),
                           (["--socket", ""], "--socket is empty"), (["--nosuch"], "unknown flag '--nosuch'")):
            r = subprocess.run([CONCORD, "doctor", *args], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stdout} {r.stderr}")
            self.assertIn(said, r.stderr, args)
            self.assertEqual(r.stdout, "", args)


if __name__ == "__main__":
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    CONCORD, CONCORDD, LIBRARY, LIBCUDA, APP = sys.argv[1:6]
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[6:])
