"""NEST from Python: place a training job, replay it on the network simulator, and get the
results as numpy structured arrays and pandas DataFrames.

    import nest
    job = nest.Job(model="gpt3-175b", accelerator="h100", topology="h100_rail_1024")
    plan = job.place()
    print(plan.iteration_time_s, plan.stages, plan.data_parallel)
    run = job.simulate(plan)
    run.timeline            # numpy structured array, one row per task
    run.to_pandas()["links"]

Names ("h100_rail_1024", "gpt3-175b", "h100") are looked up as `nest list` shows them. Sizes,
rates and times are strings with their unit as in the YAML files ("400 Gb/s", "1 us") or plain
SI floats. Errors raise `nest.InputError` (bad input) or `nest.InternalError`, carrying the
command line's one-line message and its fields (file, line, key, value, expected). Searches,
replays and sweeps release the GIL, so threads run them in parallel.
"""

import json
import os
import tempfile

import numpy as np

from . import _nest
from ._nest import InputError, InternalError

__version__ = _nest.__version__
__all__ = ["Topology", "Job", "Plan", "Run", "InputError", "InternalError", "topology", "sweep",
           "collective", "collective_sweep", "list_bundled", "data_roots"]


def _roots():
    """Data roots before the standard ones: NEST_HOME, this installation's share/nest, and the
    source tree of a build-tree module (written by CMake into _paths.py)."""
    here = os.path.dirname(os.path.abspath(__file__))
    roots = []
    if os.environ.get("NEST_HOME"):
        roots.append(os.environ["NEST_HOME"])
    try:
        from . import _paths
        roots.extend(_paths.DATA_ROOTS)
    except ImportError:
        pass
    # Installed as P/lib/pythonX.Y/dist-packages/nest: the data is in P/share/nest.
    prefix = os.path.normpath(os.path.join(here, "..", "..", "..", ".."))
    roots.append(os.path.join(prefix, "share", "nest"))
    return [r for r in roots if os.path.isdir(r)]


data_roots = _roots()

_NAMES = _nest.names()


def _structured(columns, enums=()):
    """A dict of equal-length columns as a numpy structured array; `enums` name the columns
    whose integer codes become their names."""
    fields = {}
    for key, values in columns.items():
        if key in enums:
            names = np.array(_NAMES[enums[key]] if isinstance(enums, dict) else _NAMES[key])
            fields[key] = names[np.asarray(values, dtype=np.int64)] if len(values) else \
                np.array([], dtype=names.dtype)
        elif isinstance(values, list) and values and isinstance(values[0], np.ndarray):
            cells = np.empty(len(values), dtype=object)  # one array per row (collective groups)
            for i, v in enumerate(values):
                cells[i] = v
            fields[key] = cells
        elif isinstance(values, list):
            fields[key] = np.array(values) if values else np.array([], dtype=object)
        else:
            fields[key] = np.asarray(values)
    n = len(next(iter(fields.values()))) if fields else 0
    dtype = [(k, v.dtype) for k, v in fields.items()]
    out = np.empty(n, dtype=dtype)
    for k, v in fields.items():
        out[k] = v
    return out


def _frame(array):
    try:
        import pandas as pd
    except ImportError:
        return {name: array[name] for name in array.dtype.names}
    return pd.DataFrame({name: array[name] for name in array.dtype.names})


class Topology:
    """An interconnect: a file or a bundled name (`Topology.load`), or a generator's parameters
    (`nest.topology.fat_tree(...)` and the others)."""

    def __init__(self, core):
        self._core = core

    @staticmethod
    def load(path_or_name):
        return Topology(_nest.Topology.load(str(path_or_name), data_roots))

    @staticmethod
    def from_yaml(text, name="topology"):
        return Topology(_nest.Topology.from_yaml(text, name))

    @property
    def name(self):
        return self._core.name

    @property
    def file(self):
        return self._core.file or None

    @property
    def devices(self):
        """Number of devices (ids 0..devices-1)."""
        return self._core.devices

    @property
    def switches(self):
        return self._core.switches

    def describe(self):
        """What `nest topology describe --json` prints."""
        return self._core.describe()

    @property
    def nodes(self):
        """Structured array: id, name, kind ("device"/"switch"), tier."""
        return _structured(self._core.node_columns(), {"kind": "node_kind"})

    @property
    def links(self):
        """Structured array, one row per directed link: src, dst (node ids), src_name, dst_name,
        src_tier, dst_tier, bandwidth_bytes_per_s, latency_s."""
        links = self._core.link_columns()
        nodes = self.nodes
        columns = {"src": links["src"], "dst": links["dst"],
                   "src_name": nodes["name"][links["src"]], "dst_name": nodes["name"][links["dst"]],
                   "src_tier": nodes["tier"][links["src"]], "dst_tier": nodes["tier"][links["dst"]],
                   "bandwidth_bytes_per_s": links["bandwidth_bytes_per_s"],
                   "latency_s": links["latency_s"]}
        return _structured(columns)

    def __repr__(self):
        return f"nest.Topology({self.name!r}, {self.devices} devices)"


from . import topology  # noqa: E402  (the generators need Topology)

_JOB_OPTIONS = {"profile", "model", "accelerator", "topology", "devices", "rules", "network",
                "flat_bandwidth", "flat_latency", "memory_bandwidth", "seed", "anneal_seed",
                "anneal_steps", "fixed_plan", "baselines", "precision", "flash_attention", "seq",
                "global_batch", "max_tp", "micro_batches", "orders", "ideal", "algorithm",
                "tp", "pp", "dp", "cp", "ep", "vp", "mb", "zero", "recompute", "sp", "order",
                "partition", "ignore_memory", "tp_overlap", "grad_accumulation_bytes",
                "grad_buckets", "grad_overlap", "p2p_overlap", "verify", "threads"}


class Job:
    """A training job: what to place where. Keyword arguments are `nest place`'s options
    (snake_case): model, accelerator or profile; topology (a name, a path or a `Topology`, also
    a generated one: its plans then record no topology file); devices; rules; network; seed (routing); baselines (names; default all three);
    anneal_seed, anneal_steps; seq, global_batch, precision, flash_attention; max_tp,
    micro_batches, orders; flat_bandwidth, flat_latency, memory_bandwidth; fixed_plan; ideal
    (ignore the topology's collective model); algorithm (one for every collective). A
    configuration fixes dimensions as `nest place --tp --pp ...` does: tp, pp, dp, cp, ep, vp,
    mb, zero (ints), recompute ("none", "selective", "full"), sp (bool), order ("tp-dp-pp",
    ...), partition ("balanced" or "uniform"), ignore_memory (bool); and the software:
    tp_overlap (bool), grad_accumulation_bytes, grad_buckets, grad_overlap (bool), p2p_overlap
    (bool); verify
    (candidates replayed by `place`, as `nest place --verify`; default 4 with the oracle);
    threads (for the verification's replays and, in `place_with_baselines`, the
    topology-agnostic and anneal baselines beside the search; default 2, the same results with 1)."""

    def __init__(self, **options):
        unknown = sorted(set(options) - _JOB_OPTIONS)
        if unknown:
            raise InputError(f"{unknown[0]}: unknown option (expected one of "
                             f"{', '.join(sorted(_JOB_OPTIONS))})")
        topo = options.get("topology")
        generated = None
        if isinstance(topo, Topology):
            if topo.file is not None:
                options["topology"] = topo.file
            else:  # generated: used as it is; its plans record no topology file
                generated = topo._core
                del options["topology"]
        if isinstance(options.get("baselines"), str):
            options["baselines"] = [options["baselines"]]
        self._core = _nest.Job(options, data_roots, generated)

    @classmethod
    def _wrap(cls, core):
        job = cls.__new__(cls)
        job._core = core
        return job

    @property
    def topology(self):
        core = self._core.topology
        return Topology(core) if core is not None else None

    @property
    def spec(self):
        """The resolved spec: input files, devices, rules, network, seed."""
        return self._core.spec_json()

    @property
    def oracle_simulations(self):
        """Simulations the job's collective oracle has run: pricing plans, and choosing the
        gradient buckets' algorithms of the replays run on it (`simulate`, and the
        verification's first, largest replay)."""
        return self._core.oracle_simulations

    def place(self, baselines=False):
        """The NEST search's plan (with the spec's baselines beside it when `baselines`)."""
        return Plan(self._core.place_with_baselines() if baselines else self._core.place())

    def baselines(self):
        """name -> Plan (or None when nothing fits under that baseline's rule)."""
        return {k: (Plan(v) if v is not None else None) for k, v in self._core.baselines().items()}

    def evaluate(self, plan):
        """`plan`'s choice priced by this job's cost model."""
        return Plan(self._core.evaluate(plan._core))

    def simulate(self, plan, schedule="1f1b", virtual_stages=2, buckets=None):
        """Replays one iteration of `plan`; nothing is written unless asked (`Run.write_hdf5`).
        `buckets`: the data-parallel gradient buckets, by default the job's (grad_buckets)."""
        if buckets is not None and not 1 <= buckets <= 65536:
            raise InputError(f"buckets: bucket count out of range (got \"{buckets}\"; "
                             "expected an integer in 1..65536)")
        return Run(self._core.simulate(plan._core, schedule, virtual_stages, buckets or 0))


class Plan:
    """An evaluated plan. Its fields are those of the plan file (`to_dict()`); the common ones
    are attributes: iteration_time_s, stages, data_parallel, tensor_parallel, zero_stage,
    recompute, placement_order, devices_used, breakdown, partition, baselines."""

    def __init__(self, core):
        self._core = core
        self._doc = None

    @staticmethod
    def load(path):
        """A plan file, with the job it records (inputs resolved beside the file)."""
        return Plan(_nest.Plan.load(str(path), data_roots))

    def to_dict(self, where="plan.yaml"):
        if self._doc is None or where != "plan.yaml":
            doc = json.loads(self._core.to_json(str(where)))
            if where != "plan.yaml":
                return doc
            self._doc = doc
        return self._doc

    def to_yaml(self, where="plan.yaml"):
        """The plan file text for a file at `where` (inputs are recorded relative to it)."""
        return self._core.to_yaml(str(where))

    def save(self, path):
        text = self.to_yaml(path)
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)

    @property
    def job(self):
        return Job._wrap(self._core.job())

    @property
    def iteration_time_s(self):
        return self._core.iteration_time_s

    @property
    def fits(self):
        return self._core.fits

    @property
    def breakdown(self):
        p = self.to_dict()["predicted"]
        return {k[:-2]: v for k, v in p.items() if k.endswith("_s") and k != "iteration_time_s"}

    def __getattr__(self, name):
        doc = self.to_dict()
        if name in doc:
            return doc[name]
        if name in doc["variant"]:
            return doc["variant"][name]
        if name in doc["predicted"]:
            return doc["predicted"][name]
        raise AttributeError(name)

    def __repr__(self):
        d = self.to_dict()
        return (f"nest.Plan(t={d['variant']['tensor_parallel']}, stages={d['stages']}, "
                f"data_parallel={d['data_parallel']}, iteration_time_s={self.iteration_time_s:.6g})")


class Run:
    """A replayed iteration: summary (dict) and timeline, memory, links, collectives as numpy
    structured arrays (times in seconds); `to_pandas()` for DataFrames."""

    def __init__(self, core):
        self._core = core

    @property
    def summary(self):
        return self._core.summary

    @property
    def timeline(self):
        return _structured(self._core.timeline_columns(), {"stream": "stream", "kind": "kind"})

    @property
    def memory(self):
        return _structured(self._core.memory_columns(), {"category": "category"})

    @property
    def links(self):
        return _structured(self._core.link_columns())

    @property
    def collectives(self):
        return _structured(self._core.collective_columns())

    def to_pandas(self):
        """dict of DataFrames: timeline, memory, links, collectives."""
        return {name: _frame(getattr(self, name))
                for name in ("timeline", "memory", "links", "collectives")}

    def write_hdf5(self, path, *, all_devices=False):
        """Writes the run as `nest simulate -o` does: one timeline per class of devices whose
        rows are equal (named in /timeline_classes), or every device's with all_devices."""
        self._core.write_hdf5(str(path), all_devices=all_devices)

    def write_trace(self, path):
        self._core.write_trace(str(path))

    def write_csv(self, path):
        self._core.write_csv(str(path))


def list_bundled(kind="topology"):
    """The bundled names of a kind: topology, model, accelerator, profile or study."""
    return _nest.list(kind, data_roots)


def sweep(study, threads=1, output=None):
    """Runs a study (a file, a bundled name, or a dict in the study format) and returns its
    results table as a DataFrame (a dict of numpy arrays without pandas). With `output` the
    results.csv and results.h5 stay there."""
    with tempfile.TemporaryDirectory() as scratch:
        if isinstance(study, dict):
            path = os.path.join(scratch, "study.yaml")
            with open(path, "w") as f:
                json.dump(study, f)  # JSON is YAML
        elif os.path.isfile(str(study)):
            path = str(study)
        else:
            found = [os.path.join(r, "studies", f"{study}.yaml") for r in data_roots]
            found = [p for p in found if os.path.isfile(p)]
            if not found:
                raise InputError(f"study: unknown study (got \"{study}\"; expected a file or one "
                                 f"of {', '.join(list_bundled('study'))})")
            path = found[0]
        out = str(output) if output is not None else os.path.join(scratch, "out")
        csv = _nest.sweep(path, out, threads, data_roots)
        try:
            import pandas as pd
            return pd.read_csv(csv, keep_default_na=True)
        except ImportError:
            data = np.genfromtxt(csv, delimiter=",", names=True, dtype=None, encoding="utf-8")
            return {name: data[name] for name in data.dtype.names}


def _topology_of(topology):
    return topology if isinstance(topology, Topology) else Topology.load(topology)


def _size_bytes(size):
    return _nest.parse_bytes(size) if isinstance(size, str) else int(size)


def _group_list(group, devices):
    if group is None:
        return []
    if isinstance(group, str):  # the command line's "0-7,16-23"
        out = []
        for part in group.split(","):
            a, _, b = part.partition("-")
            out.extend(range(int(a), int(b or a) + 1))
        return [d for d in out if d < devices] if out else out
    return [int(d) for d in group]


def _collectives(topology, op, sizes, algorithm, group, concurrent, chunks, channels, levels,
                 seed, ideal, links, events):
    t = _topology_of(topology)
    return _nest.collectives(t._core, op, sizes, algorithm or "", _group_list(group, t.devices),
                             concurrent or "none", chunks, channels, list(levels or []), seed,
                             ideal, links, events)


def collective(topology, op, size, algorithm=None, group=None, concurrent=None, chunks=0,
               channels=0, levels=None, seed=0, ideal=False, links=5, events=False):
    """One collective, simulated and in closed form: the same figures as `nest collective
    --json` (a dict). `topology` is a Topology, a file or a bundled name; `size` a string with
    its unit ("1 GiB") or bytes; `algorithm` a name, "auto" (the tuner's fastest) or None (the
    default: the tuner under a collective model, else ring); `group` device ids (or "0-7");
    `concurrent` "stride:S[:K]"."""
    return _collectives(topology, op, [_size_bytes(size)], algorithm, group, concurrent, chunks,
                        channels, levels, seed, ideal, links, events)[0]


_SWEEP_COLUMNS = ("size_bytes", "count", "algorithm", "protocol", "channels", "time_s",
                  "algbw_bytes_per_s", "busbw_bytes_per_s", "closed_form_s", "difference_s",
                  "base_latency_s", "flows", "events", "method")


def collective_sweep(topology, op, sizes="8:4G", algorithm=None, group=None, concurrent=None,
                     chunks=0, channels=0, levels=None, seed=0, ideal=False, events=False):
    """An nccl-tests-style sweep in one call: `sizes` in nccl-tests' MIN:MAX[:FACTOR] notation
    (as `nest collective --sizes`) or a list of sizes. Returns a DataFrame (a dict of numpy
    arrays without pandas) with nccl-tests' columns: size_bytes, count, time_s, algbw and busbw
    (bytes/s), the closed form and the difference, the algorithm, protocol and channels."""
    values = _nest.parse_sizes(sizes) if isinstance(sizes, str) else [_size_bytes(s) for s in sizes]
    rows = _collectives(topology, op, values, algorithm, group, concurrent, chunks, channels,
                        levels, seed, ideal, 0, events)
    columns = {c: [r["simulated_s"] if c == "time_s" else r[c] for r in rows]
               for c in _SWEEP_COLUMNS}
    try:
        import pandas as pd
        return pd.DataFrame(columns)
    except ImportError:
        return {c: np.asarray(v) for c, v in columns.items()}
