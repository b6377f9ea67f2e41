"""How run.py drives the processes of a round (standard library only: the tests use it without
PyTorch). A resident process (an LC service, a BE job, the priority-streams pair) builds and warms
its model once, then serves jobs from a control folder of its own:

  ready            created by the process once it is warm
  job-N.json       a job, written by the driver (N = 1, 2, ...; atomically, by rename)
  done-N.json      the process's answer to job N ({"ok": true, ...} or {"ok": false, "error": ...})
  exit             the driver asks the process to end

A process takes its jobs in order and polls for the next every `POLL_S` seconds while idle (a
stat per poll: nothing measurable beside the running scheme). A BE job asked to train keeps
training until the next job file appears (its pause), then answers that one.
"""
import json
import os
import time

POLL_S = 0.005


def write_atomic(path, obj):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


class Server:
    """The resident process's side."""

    def __init__(self, folder):
        self.folder = folder
        self.next_id = 1
        os.makedirs(folder, exist_ok=True)

    def path(self, name):
        return os.path.join(self.folder, name)

    def ready(self, info=None):
        write_atomic(self.path("ready"), info or {})

    def pending(self):
        """Whether the next job (or the exit) is there, without taking it."""
        return os.path.exists(self.path(f"job-{self.next_id}.json")) or os.path.exists(self.path("exit"))

    def next_job(self):
        """The next job, waiting for it; None once the driver asked the process to end."""
        while True:
            p = self.path(f"job-{self.next_id}.json")
            if os.path.exists(p):
                with open(p) as f:
                    job = json.load(f)
                job["id"] = self.next_id
                self.next_id += 1
                return job
            if os.path.exists(self.path("exit")):
                return None
            time.sleep(POLL_S)

    def done(self, job, **answer):
        write_atomic(self.path(f"done-{job['id']}.json"), {"ok": True, **answer})

    def failed(self, job, error):
        write_atomic(self.path(f"done-{job['id']}.json"), {"ok": False, "error": error})


class ProcessGone(RuntimeError):
    pass


class Client:
    """The driver's side of one resident process (`proc`: its Popen)."""

    def __init__(self, folder, proc, name):
        self.folder, self.proc, self.name = folder, proc, name
        self.next_id = 1

    def path(self, name):
        return os.path.join(self.folder, name)

    def _wait(self, name, timeout):
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.path(name)):
            if self.proc.poll() is not None:
                raise ProcessGone(f"{self.name} ended (rc {self.proc.returncode}) before {name}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: no {name} within {timeout:.0f} s")
            time.sleep(POLL_S)
        with open(self.path(name)) as f:
            return json.load(f)

    def wait_ready(self, timeout):
        return self._wait("ready", timeout)

    def submit(self, **job):
        n = self.next_id
        self.next_id += 1
        write_atomic(self.path(f"job-{n}.json"), job)
        return n

    def wait(self, n, timeout):
        answer = self._wait(f"done-{n}.json", timeout)
        if not answer.get("ok"):
            raise RuntimeError(f"{self.name}: {answer.get('error', 'failed')}")
        return answer

    def call(self, timeout, **job):
        return self.wait(self.submit(**job), timeout)

    def stop(self, timeout=30.0):
        """Asks the process to end and waits; kills it after `timeout`. Its exit status."""
        open(self.path("exit"), "w").close()
        try:
            return self.proc.wait(timeout=timeout)
        except Exception:  # subprocess.TimeoutExpired; the caller only needs it gone
            self.proc.kill()
            return self.proc.wait()
