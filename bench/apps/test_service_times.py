"""service_times.py on synthetic phases with known answers."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json
import os
import tempfile
import unittest

import service_times


class ServiceTimes(unittest.TestCase):
    def test_a_request_that_queued_is_served_from_the_previous_end(self):
        # Arrivals at 0, 1, 1.5; each served in 1 s: the third waits 0.5 s behind the second.
        svc = service_times.service_times([0.0, 1.0, 1.5], [1.0, 1.0, 1.5])
        self.assertEqual(svc, [1.0, 1.0, 1.0])

    def test_an_idle_server_starts_at_the_arrival(self):
        self.assertEqual(service_times.service_times([0.0, 5.0], [0.25, 0.5]), [0.25, 0.5])

    def test_utilisation_is_the_rate_times_the_mean_service_time(self):
        phase = {"rate_rps": 100.0, "arrivals": [i * 0.01 for i in range(10)], "latency_s": [0.006] * 10,
                 "cpu_s": [0.005] * 10, "rq_wait_s": [0.0] * 10}
        row = service_times.phase_row(phase)
        self.assertAlmostEqual(row["utilisation"], 0.6)
        self.assertAlmostEqual(row["service_p50_ms"], 6.0)
        self.assertAlmostEqual(row["cpu_p50_ms"], 5.0)

    def test_a_saturated_phase_shows_a_utilisation_above_one(self):
        # Arrivals every 10 ms, each request 12 ms of service: the queue grows all phase.
        arrivals = [i * 0.01 for i in range(100)]
        latencies = [(i + 1) * 0.012 - a for i, a in enumerate(arrivals)]
        row = service_times.phase_row({"rate_rps": 100.0, "arrivals": arrivals, "latency_s": latencies})
        self.assertAlmostEqual(row["utilisation"], 1.2, places=6)
        self.assertGreater(row["latency_p99_ms"], 100)

    def test_every_lc_json_under_a_folder_is_read_and_named_by_where_it_is(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "round1", "mps"))
            with open(os.path.join(d, "round1", "mps", "lc.json"), "w") as f:
                json.dump({"phases": [{"rate_rps": 10.0, "arrivals": [0.0], "latency_s": [0.01]}]}, f)
            rows = service_times.collect([d])
            self.assertEqual([r["where"] for r in rows], [os.path.join("round1", "mps")])


if __name__ == "__main__":
    unittest.main()
