"""The Python module against the command line: the same inputs give the same numbers as the
CLI's --json, errors carry the CLI's message and fields, plans round-trip through YAML, and
searches and replays release the GIL. Run by ctest with /usr/bin/python3 and
PYTHONPATH=<build>/python; argv: <nest executable> <source dir>."""

import json
import os
import subprocess
import sys
import tempfile
import threading
import unittest

import numpy as np

import nest

NEST = os.environ["NEST_EXECUTABLE"]
SOURCE = os.environ["NEST_SOURCE_DIR"]


def cli(*args):
    out = subprocess.run([NEST, *args], check=True, capture_output=True, text=True, cwd=SOURCE)
    return json.loads(out.stdout)


SMALL = dict(model="llama2-7b", accelerator="h100", topology="h100_rail_1024", devices=16,
             baselines=[])
SMALL_CLI = ["--model", "llama2-7b", "--accelerator", "h100", "--topology", "h100_rail_1024",
             "--devices", "16", "--baselines", "none"]


class TopologyTest(unittest.TestCase):
    def test_describe_equals_the_cli(self):
        t = nest.Topology.load("h100_rail_1024")
        self.assertEqual(t.describe(), cli("topology", "describe", "h100_rail_1024", "--json"))
        self.assertEqual(t.devices, 1024)

    def test_links_carry_names_and_tiers(self):
        t = nest.Topology.load("small_explicit")
        links = t.links
        self.assertEqual(len(links), t.describe()["directed_links"])
        self.assertEqual(set(links.dtype.names),
                         {"src", "dst", "src_name", "dst_name", "src_tier", "dst_tier",
                          "bandwidth_bytes_per_s", "latency_s"})
        nodes = t.nodes
        self.assertEqual(list(nodes["kind"][:4]), ["device"] * 4)
        for row in links:
            self.assertEqual(nodes["name"][row["src"]], row["src_name"])

    def test_generators_take_the_file_keys(self):
        # k = 4 fat-tree: k^3/4 = 16 hosts; 5 k^2/4 = 20 switches.
        t = nest.topology.fat_tree(k=4, link_bandwidth="400 Gb/s", link_latency="1 us")
        self.assertEqual((t.devices, t.switches), (16, 20))
        self.assertAlmostEqual(t.describe()["injection_bytes_per_s"], 50e9)
        with self.assertRaises(nest.InputError) as e:
            nest.topology.fat_tree(k=3, link_bandwidth="400 Gb/s", link_latency="1 us")
        self.assertEqual(e.exception.key, "k")
        self.assertEqual(e.exception.value, "3")


class CollectiveTest(unittest.TestCase):
    def test_collective_equals_nest_collective(self):
        for args in (("dgx_h100", "allreduce", "1 GiB", {}),
                     ("h100_rail_64", "all_gather", "64 MiB", {"algorithm": "ring"}),
                     ("small_explicit", "allreduce", "8 MiB", {"ideal": True})):
            topology, op, size, kw = args
            got = nest.collective(topology, op, size, **kw)
            flags = [f"--{k}" if v is True else f"--{k}={v}" for k, v in kw.items()]
            want = cli("collective", "--topology", topology, "--op", op, "--size",
                       size.replace(" ", ""), *flags, "--json")
            for key, value in want.items():
                self.assertEqual(got[key], value, f"{topology} {key}")

    def test_sweep_rows_equal_nest_collective_sizes(self):
        df = nest.collective_sweep("dgx_h100", "allreduce", "1K:1G:4")
        want = cli("collective", "--topology", "dgx_h100", "--op", "allreduce", "--sizes",
                   "1K:1G:4", "--json")["rows"]
        self.assertEqual(list(df["size_bytes"]), [r["size_bytes"] for r in want])
        self.assertEqual(list(df["time_s"]), [r["time_s"] for r in want])
        self.assertEqual(list(df["busbw_bytes_per_s"]), [r["busbw_bytes_per_s"] for r in want])
        self.assertEqual(list(df["protocol"]), [r["protocol"] for r in want])
        # nccl-tests' count: 4-byte floats of the buffer (allreduce).
        self.assertEqual(list(df["count"]), [s // 4 for s in df["size_bytes"]])

    def test_bad_operation_is_an_input_error(self):
        with self.assertRaises(nest.InputError) as e:
            nest.collective("dgx_h100", "allgather_v", "1 MiB")
        self.assertTrue(str(e.exception).startswith("--op: unknown operation"), str(e.exception))


class JobTest(unittest.TestCase):
    def test_place_equals_nest_place(self):
        plan = nest.Job(**SMALL).place()
        doc = cli("place", *SMALL_CLI, "--json")
        self.assertEqual(plan.iteration_time_s, doc["predicted"]["iteration_time_s"])
        self.assertEqual(plan.stages, doc["stages"])
        self.assertEqual(plan.data_parallel, doc["data_parallel"])
        self.assertEqual(plan.tensor_parallel, doc["variant"]["tensor_parallel"])
        self.assertEqual(plan.to_dict()["partition"], doc["partition"])

    def test_artifact_row_and_baselines_equal_the_cli(self):
        job = nest.Job(profile="gpt3-175b-h100", rules="nest-artifact", devices=128,
                       baselines=["manual"])
        plan = job.place(baselines=True)
        doc = cli("place", "--profile", "gpt3-175b-h100", "--rules", "nest-artifact",
                  "--devices", "128", "--baselines", "manual", "--json")
        # tests/validation/reference/nest-artifact/expected-nest.tsv: 245184.584 ms
        self.assertAlmostEqual(plan.iteration_time_s, 245.184584, delta=245.184584e-3)
        self.assertEqual(plan.baselines, doc["baselines"])
        manual = job.baselines()["manual"]
        self.assertEqual(manual.iteration_time_s, doc["baselines"]["manual"]["iteration_time_s"])

    def test_simulate_equals_nest_simulate(self):
        job = nest.Job(**SMALL)
        plan = job.place()
        run = job.simulate(plan)
        with tempfile.TemporaryDirectory() as tmp:
            plan_path = os.path.join(tmp, "plan.yaml")
            plan.save(plan_path)
            doc = cli("simulate", "--plan", plan_path, "-o", os.path.join(tmp, "run.h5"), "--json")
        for key, value in doc["summary"].items():
            self.assertEqual(run.summary[key], value, key)
        t = run.timeline
        self.assertEqual(t.dtype.names, ("device", "stream", "kind", "stage", "microbatch",
                                         "first_layer", "last_layer", "start_s", "end_s"))
        self.assertTrue(set(np.unique(t["kind"])) <= {"forward", "backward", "recompute",
                                                      "send_activation", "send_gradient",
                                                      "layer_collective", "gradient_sync",
                                                      "optimizer"})
        self.assertAlmostEqual(float(t["end_s"].max()), run.summary["iteration_time_s"],
                               places=9)
        frames = run.to_pandas()
        self.assertEqual(set(frames), {"timeline", "memory", "links", "collectives"})
        self.assertEqual(len(frames["links"]), len(run.links))

    def test_hdf5_folds_equal_timelines_unless_all_devices(self):
        import h5py
        job = nest.Job(**SMALL)
        run = job.simulate(job.place())
        with tempfile.TemporaryDirectory() as tmp:
            folded, full = os.path.join(tmp, "folded.h5"), os.path.join(tmp, "full.h5")
            run.write_hdf5(folded)
            run.write_hdf5(full, all_devices=True)
            with h5py.File(folded) as f, h5py.File(full) as g:
                classes = f["timeline_classes"][()]
                # Every device of the run has a class; the folded file keeps one device's rows
                # per class, the full one every device's (as many rows as the run's timeline).
                self.assertEqual(len(classes), len(np.unique(run.timeline["device"])))
                self.assertEqual(len(g["timeline"]), len(run.timeline))
                self.assertLess(len(f["timeline"]), len(g["timeline"]))

    def test_plan_round_trips_through_yaml(self):
        plan = nest.Job(**SMALL).place()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "plan.yaml")
            plan.save(path)
            again = nest.Plan.load(path)
            self.assertEqual(again.iteration_time_s, plan.iteration_time_s)
            a, b = again.to_dict(), plan.to_dict()
            for key in ("variant", "stages", "data_parallel", "partition", "predicted"):
                self.assertEqual(a[key], b[key], key)

    def test_errors_carry_the_cli_message_and_fields(self):
        with self.assertRaises(nest.InputError) as e:
            nest.Job(model="llama2-7b", accelerator="v5e", topology="h100_rail_1024")
        self.assertEqual(e.exception.key, "workload.accelerator")
        self.assertEqual(e.exception.value, "v5e")
        self.assertTrue(str(e.exception).startswith(
            "workload.accelerator: unknown accelerator (got \"v5e\"; expected one of"))
        with self.assertRaises(nest.InputError) as e:
            nest.Job(**{**SMALL, "devices": 2048})
        self.assertEqual(str(e.exception), "devices: device count out of range (got \"2048\"; "
                                           "expected 1..1024 (the topology's devices))")
        with self.assertRaises(nest.InputError) as e:
            nest.Job(**{**SMALL, "colour": "red"})
        self.assertTrue(str(e.exception).startswith("colour: unknown option"))
        with self.assertRaises(nest.InputError) as e:
            nest.Job(**{**SMALL, "verify": 65})
        self.assertEqual(str(e.exception), "verify: candidates to verify out of range (got "
                                           "\"65\"; expected an integer in 0..64)")
        with self.assertRaises(nest.InputError) as e:
            nest.Job(**{**SMALL, "threads": 0})
        self.assertEqual(str(e.exception), "threads: threads out of range (got \"0\"; "
                                           "expected an integer in 1..64)")
        self.assertTrue(issubclass(nest.InputError, ValueError))
        self.assertTrue(issubclass(nest.InternalError, RuntimeError))

    def test_fixed_dimensions_equal_nest_place(self):
        fixed = dict(tp=8, pp=2, dp=4, mb=1, zero=1, recompute="selective", sp=True,
                     order="tp-pp-dp", grad_buckets=2, grad_overlap=False, p2p_overlap=False)
        job = nest.Job(model="llama2-7b", accelerator="h100", topology="h100_rail_64",
                       baselines=[], **fixed)
        plan = job.place()
        doc = cli("place", "--model", "llama2-7b", "--accelerator", "h100", "--topology",
                  "h100_rail_64", "--baselines", "none", "--tp", "8", "--pp", "2", "--dp", "4",
                  "--mb", "1", "--zero", "1", "--recompute", "selective", "--sp", "on",
                  "--order", "tp-pp-dp", "--grad-buckets", "2", "--grad-overlap", "off",
                  "--p2p-overlap", "off", "--json")
        self.assertEqual(plan.iteration_time_s, doc["predicted"]["iteration_time_s"])
        self.assertEqual((plan.stages, plan.data_parallel, plan.tensor_parallel, plan.zero_stage),
                         (2, 4, 8, 1))
        self.assertEqual(plan.to_dict()["inputs"]["search"], doc["inputs"]["search"])
        self.assertEqual(doc["inputs"]["search"]["gradient_buckets"], 2)
        self.assertFalse(doc["inputs"]["search"]["overlap_boundary_transfers"])
        with self.assertRaises(nest.InputError) as e:
            nest.Job(model="llama2-7b", accelerator="h100", topology="h100_rail_64", tp=8, pp=40)
        self.assertEqual(str(e.exception), "pp: a pipeline of 40 stages needs at least 40 layers, "
                                           "the model has 34 (got \"40\"; expected 1..34 stages)")
        with self.assertRaises(nest.InputError) as e:
            nest.Job(model="llama2-7b", accelerator="h100", topology="h100_rail_64", tp=3)
        self.assertEqual(e.exception.key, "tp")

    def test_bad_numbers_name_the_keyword(self):
        # Bounded by the Job itself, as the CLI's flags and study files are: the message names
        # the keyword, never the spec's field.
        cases = {
            "dp=0": (dict(dp=0), 'dp: data-parallel degree out of range (got "0"; expected at '
                                 'least 1)'),
            "dp=-3": (dict(dp=-3), 'dp: data-parallel degree out of range (got "-3"; expected '
                                   'at least 1)'),
            "accumulation -5": (
                dict(grad_accumulation_bytes=-5),
                'grad_accumulation_bytes: gradient accumulation bytes out of range (got "-5"; '
                'expected bytes per parameter and microbatch in 0..1048576)'),
            "accumulation 1e14": (
                dict(grad_accumulation_bytes=10**14),
                'grad_accumulation_bytes: gradient accumulation bytes out of range (got '
                '"100000000000000"; expected bytes per parameter and microbatch in 0..1048576)'),
            "buckets 0": (dict(grad_buckets=0), 'grad_buckets: bucket count out of range (got '
                                                '"0"; expected an integer in 1..65536)'),
            "buckets 1e5": (dict(grad_buckets=100000), 'grad_buckets: bucket count out of range '
                                                       '(got "100000"; expected an integer in '
                                                       '1..65536)'),
        }
        for name, (extra, message) in cases.items():
            with self.assertRaises(nest.InputError, msg=name) as e:
                nest.Job(**{**SMALL, **extra})
            self.assertEqual(str(e.exception), message, name)
        # Errors of the search (after the constructor) carry the keyword too.
        job = nest.Job(**{**SMALL, "zero": 7, "baselines": ["topology-agnostic"]})
        for call in (job.place, lambda: job.place(baselines=True), job.baselines):
            with self.assertRaises(nest.InputError) as e:
                call()
            self.assertEqual(str(e.exception),
                             'zero: ZeRO stage out of range (got "7"; expected 0..3)')
            self.assertEqual(e.exception.key, "zero")
        # The replay's buckets are bounded as the job's are; the job still places afterwards.
        job = nest.Job(**SMALL)
        plan = job.place()
        with self.assertRaises(nest.InputError) as e:
            job.simulate(plan, buckets=100000)
        self.assertEqual(str(e.exception), 'buckets: bucket count out of range (got "100000"; '
                                           'expected an integer in 1..65536)')
        self.assertEqual(job.place().iteration_time_s, plan.iteration_time_s)

    def test_generated_topologies_place(self):
        t = nest.topology.rail_optimized(
            nodes=4, gpus_per_node=8, nodes_per_leaf=2, spines=2, nvlink_bandwidth="450 GB/s",
            nvlink_latency="0.5 us", nic_bandwidth="400 Gb/s", nic_latency="1 us",
            spine_bandwidth="400 Gb/s", spine_latency="1 us")
        plan = nest.Job(model="llama2-7b", accelerator="h100", topology=t, baselines=[]).place()
        self.assertLessEqual(plan.devices_used, 32)
        self.assertGreater(plan.iteration_time_s, 0)


class GilTest(unittest.TestCase):
    def test_replays_release_the_gil(self):
        # While one thread is inside a replay, another runs Python: with the GIL held it could
        # not take a single step until the replay returned.
        job = nest.Job(model="gpt3-175b", accelerator="h100", topology="h100_rail_1024",
                       baselines=[], verify=0)
        plan = job.place()
        steps = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                steps[0] += 1

        spinner = threading.Thread(target=spin)
        spinner.start()
        while steps[0] == 0:
            pass
        before = steps[0]
        job.simulate(plan)
        during = steps[0] - before
        stop.set()
        spinner.join()
        self.assertGreater(during, 0)

    def test_two_threads_simulate_at_once(self):
        results = {}

        def work(name):
            job = nest.Job(**SMALL)
            results[name] = job.simulate(job.place()).summary["iteration_time_s"]

        threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results["a"], results["b"])


class SweepTest(unittest.TestCase):
    def test_sweep_returns_the_results_table(self):
        study = {"kind": "study", "topologies": {"rail": {"file": "small_explicit"}},
                 "workloads": {"llama": {"model": "llama2-7b", "accelerator": "h100"}},
                 "placer": {"baselines": []},
                 "sweep": {"points": [{"topology": "rail", "workload": "llama", "devices": 4},
                                      {"topology": "rail", "workload": "llama", "devices": 2}]}}
        df = nest.sweep(study, threads=2)
        self.assertEqual(list(df["point"]), [0, 1])
        self.assertEqual(list(df["status"]), ["ok", "ok"])
        self.assertEqual(list(df["devices_available"]), [4, 2])
        self.assertEqual(df["iteration_s"].dtype, np.float64)


if __name__ == "__main__":
    unittest.main()
