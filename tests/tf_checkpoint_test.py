#!/usr/bin/env python3
"""Interop: TensorFlow checkpoints (tensor bundle, V2) and string tensors, dflow <-> TensorFlow.

Real `dflow server` processes on 127.0.0.1 (tests/dflow_cluster.py) and `dflow run-graph`,
driven and checked by real TensorFlow (tf.compat.v1). Cases, each printing one PASS/FAIL
line with its reason (and "ok"/"FAIL"/"info" lines for its checks before it):

  string_feed_fetch  1 ps + 1 worker; tf.compat.v1.Session("grpc://<worker>") feeds string
                     placeholders (empty, non-ASCII, NUL/0xff bytes, 1000 and 70000 bytes;
                     TensorFlow's client encodes string feeds in TensorProto.tensor_content)
                     through Identity, tf.strings.join and tf.strings.length on /job:ps and
                     fetches them back: the values must equal local TensorFlow's.
  tf_reads_dflow     a GraphDef written by TensorFlow (Consts of float32, float64, int32,
                     int64, uint8, bool, string, a scalar and a [0,3] tensor; SaveV2; a SaveV2
                     of the slices of two partitioned tensors, along axis 0 and 1; and two
                     SaveV2 to temp prefixes merged by MergeV2Checkpoints) is run by
                     `dflow run-graph --target ...`; tf.train.list_variables and
                     tf.train.load_checkpoint must report the same names, shapes, dtypes and
                     values, the index keys must be TensorFlow's (same graph run by TF), and
                     the merged checkpoint's files must be TensorFlow's.
  dflow_reads_tf     the golden checkpoints of tests/data/checkpoints (written by TensorFlow's
                     Saver, see tests/data/gen_checkpoint_reference.py): a RestoreV2 graph
                     (all keys, plus slices spanning two stored slices) run by
                     `dflow run-graph --fetch` must print expected.json's values (strings that
                     are not UTF-8 cannot be printed as JSON: those are restored through
                     TensorFlow's client on a dflow server instead, with everything else);
                     restoring a missing key, with a wrong dtype, or from a data file with a
                     flipped byte must fail.
  saver_on_cluster   2 ps + 1 worker; replica_device_setter-placed variables (float, int64
                     global step, string), tf.compat.v1.train.Saver(sharded=True) and Saver()
                     through grpc://<worker>: save at global_step=7, overwrite, restore, read
                     back; TensorFlow loads the same files locally.
  monitored_resume   MonitoredTrainingSession(checkpoint_dir, save_checkpoint_steps=10,
                     StopAtStepHook(last_step=30)) trains softmax regression (variables on the
                     ps) on 1 ps + 1 worker and on 2 ps + 1 worker; then on a fresh cluster
                     (new ports, no state) with last_step=40: it must resume at 30 and reach
                     40. The loss trajectories must equal local TensorFlow's (same graph, same
                     seed) within 1e-5. Clients run as subprocesses with a timeout.
  supervisor         tf.compat.v1.train.Supervisor, between-graph, 1 ps + 2 workers, a client
                     subprocess per worker: async (GradientDescent, managed_session) and sync
                     (SyncReplicasOptimizer replicas_to_aggregate=2, prepare_or_wait_for_session,
                     the chief starting the chief queue runner and running the init-tokens op),
                     to global step 20, with Supervisor's timer checkpoint (save_model_secs=1)
                     holding step >= 20 in logdir at the end.

Every wait is bounded: subprocesses have timeouts, and a watchdog kills a cluster's servers
(so a blocked TensorFlow client call returns with an error) once it has run
CASE_TIMEOUT_S. Servers are always stopped. Each case has its own temp dir (removed when
it passes, kept and printed when it fails).

Exits 77 (skipped, reason printed) only where TensorFlow cannot be imported; else 0 when
every case passes, 1 otherwise.
Usage: tf_checkpoint_test.py path/to/dflow [--only NAME ...]
       (internally: tf_checkpoint_test.py --client mts|supervisor --spec JSON)
"""
import argparse
import contextlib
import faulthandler
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dflow_cluster import Checks, start_cluster, import_tensorflow_or_skip  # noqa: E402

np, tf = import_tensorflow_or_skip()
tf1 = tf.compat.v1
tf1.disable_eager_execution()

GOLDEN = os.path.join(HERE, "data", "checkpoints")
RUN_GRAPH_TIMEOUT_S = 60
CLIENT_TIMEOUT_S = 150
CASE_TIMEOUT_S = 300
SESSION_CONFIG = dict(operation_timeout_in_ms=60000)
# dflow's DataTypeString names (run-graph's "dtype") for TensorFlow's dtype names.
DFLOW_DTYPE = {"float32": "float", "float64": "double", "int32": "int32", "int64": "int64",
               "uint8": "uint8", "bool": "bool", "string": "string"}


# --- Checks and case bookkeeping ------------------------------------------------------------

class CaseFailed(Exception):
    pass


def same(got, want):
    """Exact equality of two numpy values (shapes, dtypes, elements; strings as bytes)."""
    # Not np.asarray(bytes): numpy's fixed-width bytes drop trailing NULs.
    got, want = (np.array(v, dtype=object) if isinstance(v, bytes) else np.asarray(v)
                 for v in (got, want))
    if got.shape != want.shape:
        return False
    if want.dtype == object or got.dtype == object:
        return [bytes(x) for x in got.reshape(-1)] == [bytes(x) for x in want.reshape(-1)]
    return got.dtype == want.dtype and np.array_equal(got, want)


def plain(value):
    """Lists, bytes and numbers instead of numpy values, for printing."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return value


def short(value, limit=160):
    text = repr(plain(value))
    return text if len(text) <= limit else text[:limit] + "..."


def first_line(e, limit=600):
    text = f"{type(e).__name__}: {e}"
    if isinstance(e, tf.errors.OpError):
        text = f"{type(e).__name__}: {e.message}"
    text = " | ".join(line for line in text.splitlines() if line.strip())
    return text if len(text) <= limit else text[:limit] + "..."


@contextlib.contextmanager
def dflow_cluster(dflow, tmp, tasks, checks, timeout=CASE_TIMEOUT_S):
    """Starts `dflow server` tasks; a watchdog kills them after `timeout` s (so a blocked
    TensorFlow client call fails instead of hanging); always stops them; prints their log
    tails when the block raises or a check failed."""
    log_dir = tempfile.mkdtemp(prefix="servers_", dir=tmp)
    cluster_json, ports, servers = start_cluster(dflow, log_dir, tasks)
    everyone = [s for group in servers.values() for s in group]
    fired = []

    def kill_all():
        fired.append(True)
        print(f"    watchdog: killing the servers after {timeout}s", flush=True)
        for s in everyone:
            if s.proc.poll() is None:
                s.proc.kill()

    timer = threading.Timer(timeout, kill_all)
    timer.daemon = True
    timer.start()
    failures_before = len(checks.failures)
    raised = False
    try:
        yield json.loads(cluster_json), ports, servers
    except BaseException:
        raised = True
        raise
    finally:
        timer.cancel()
        for s in everyone:
            s.stop(signal.SIGKILL)
        if raised or fired or len(checks.failures) > failures_before:
            for s in everyone:
                print(f"    --- {s.name} log (tail) ---\n{s.output()[-4000:]}", flush=True)


def run_dflow(dflow, args, timeout=RUN_GRAPH_TIMEOUT_S):
    """(exit code, stdout, stderr) of `dflow ARGS`; a timeout is exit code 'timeout'."""
    try:
        p = subprocess.run([dflow] + args, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return "timeout", (e.stdout or b"").decode(errors="replace"), \
            (e.stderr or b"").decode(errors="replace") + f" (timed out after {timeout}s)"
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def dflow_error(rc, stderr):
    lines = [line for line in stderr.splitlines() if line.strip()]
    return f"exit {rc}: " + (" | ".join(lines[-3:]) if lines else "(no stderr)")


def write_graph(graph, directory, name):
    tf.io.write_graph(graph.as_graph_def(), directory, name, as_text=True)
    return os.path.join(directory, name)


def subgraph_ops(graph_def, roots):
    """Op type -> sorted devices of the nodes `roots` depend on (data and control inputs)."""
    nodes = {n.name: n for n in graph_def.node}
    seen, stack = set(), [r.split(":")[0].lstrip("^") for r in roots]
    while stack:
        name = stack.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        stack.extend(i.split(":")[0].lstrip("^") for i in nodes[name].input)
    ops = {}
    for name in seen:
        ops.setdefault(nodes[name].op, set()).add(nodes[name].device or "(none)")
    return {op: sorted(devices) for op, devices in sorted(ops.items())}


def format_ops(ops):
    return ", ".join(f"{op}[{' '.join(d)}]" for op, d in ops.items())


# --- a. string_feed_fetch --------------------------------------------------------------------

STRING_FEED = [b"", "héllo".encode(), b"\x00\xff", b"x" * 1000]
STRING_FEED_LONG = STRING_FEED + [b"\x80" * 130, b"z" * 70000, "wörld ✓".encode()]
STRING_MATRIX = [[b"a\x00", b""], ["ü".encode(), b"\xff" * 3]]
STRING_CONST = [b"const\xff", b"", "é".encode()]


def string_graphs(ps_device):
    """name -> (graph, fetches, feeds) for the three string checks."""
    out = {}
    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder(tf.string, [None], name="p")
        s = tf1.placeholder(tf.string, [], name="s")
        m = tf1.placeholder(tf.string, [2, 2], name="m")
        with tf.device(ps_device):
            fetches = [tf.identity(p), tf.identity(s), tf.identity(m),
                       tf.constant(STRING_CONST, name="c")]
        out["Identity on the ps (vector, scalar, [2,2] feeds; a Const)"] = (
            g, fetches, {p: STRING_FEED_LONG, s: "scalar ✓".encode(), m: STRING_MATRIX})
    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder(tf.string, [None], name="p")
        s = tf1.placeholder(tf.string, [], name="s")
        with tf.device(ps_device):
            fetches = [tf.strings.join([p, s, p], separator="|")]
        out["tf.strings.join on the ps"] = (g, fetches, {p: STRING_FEED, s: b"\xfe-"})
    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder(tf.string, [None], name="p")
        with tf.device(ps_device):
            fetches = [tf.strings.length(p), tf.strings.length(p, unit="UTF8_CHAR")]
        out["tf.strings.length on the ps"] = (g, fetches, {p: STRING_FEED[:2] + [b"x" * 1000]})
    return out


def run_string_graph(target, graph, fetches, feeds):
    config = tf1.ConfigProto(**SESSION_CONFIG) if target else None
    with tf1.Session(target, graph=graph, config=config) as sess:
        return sess.run(fetches, {k: np.array(v, dtype=object) for k, v in feeds.items()})


def case_string_feed_fetch(dflow, tmp, checks):
    want = {name: run_string_graph("", *spec) for name, spec in string_graphs("").items()}
    with dflow_cluster(dflow, tmp, {"ps": 1, "worker": 1}, checks) as (cluster, _, _):
        target = "grpc://" + cluster["worker"][0]
        for name, spec in string_graphs("/job:ps/task:0").items():
            try:
                got = run_string_graph(target, *spec)
            except tf.errors.OpError as e:
                checks.check(False, f"{name}: {first_line(e)}")
                continue
            ok = all(same(g, w) for g, w in zip(got, want[name]))
            checks.check(ok, f"{name}: dflow {short(got)}" +
                         ("" if ok else f", TensorFlow {short(want[name])}"))


# --- b. tf_reads_dflow -----------------------------------------------------------------------

def save_tensors():
    rng = np.random.RandomState(99)
    return {
        "f32": (0.1 * np.arange(12) - 1.7).astype(np.float32).reshape(3, 4),
        "f32_scalar": np.float32(-0.3),
        "f32_empty": np.zeros([0, 3], np.float32),
        "f64": rng.normal(size=[5]).astype(np.float64),
        "i32": np.array([[1, -2], [2**31 - 1, -2**31]], np.int32),
        "i64": np.array([2**40 + 3, -1, 0], np.int64),
        "u8": np.array([0, 7, 128, 255], np.uint8),
        "bool": np.array([True, False, False, True]),
        "str": np.array([b"", "héllo wörld ✓".encode(), b"\x00\xff", b"y" * 300], dtype=object),
        "str_scalar": np.array(b"\xffscalar\x00", dtype=object),
        "a/nested/name": np.array([1.5, 2.5], np.float32),
    }


PART_EMB = (0.25 * np.arange(40) - 3.3).astype(np.float32).reshape(10, 4)
PART_COLS = (-0.7 * np.arange(18) + 2.9).astype(np.float32).reshape(3, 6)


def save_graph(directory):
    """The SaveV2/MergeV2Checkpoints graph writing under `directory`; its target names and
    prefixes (basic, part, sharded)."""
    tensors = save_tensors()
    p = {"basic": os.path.join(directory, "basic", "model"),
         "part": os.path.join(directory, "part", "model"),
         "sharded": os.path.join(directory, "sharded", "model")}
    temp = [os.path.join(directory, "sharded", "model_temp", f"part-{i:05d}-of-00002")
            for i in range(2)]
    g = tf.Graph()
    with g.as_default():
        consts = [tf.constant(v, name="c_" + k.replace("/", "_")) for k, v in tensors.items()]
        tf.raw_ops.SaveV2(prefix=tf.constant(p["basic"], name="prefix_basic"),
                          tensor_names=list(tensors), shape_and_slices=[""] * len(tensors),
                          tensors=consts, name="save_basic")
        # Partitioned tensors as TensorFlow's Saver saves them: the full name repeated, one
        # "full shape, slice" spec per piece.
        specs = [("emb", "10 4 0,4:-", PART_EMB[0:4]), ("emb", "10 4 4,6:-", PART_EMB[4:10]),
                 ("cols", "3 6 -:0,3", PART_COLS[:, 0:3]), ("cols", "3 6 -:3,3", PART_COLS[:, 3:6]),
                 ("plain", "", np.array([7, 8], np.int64))]
        tf.raw_ops.SaveV2(prefix=tf.constant(p["part"], name="prefix_part"),
                          tensor_names=[n for n, _, _ in specs],
                          shape_and_slices=[s for _, s, _ in specs],
                          tensors=[tf.constant(v, name=f"piece{i}")
                                   for i, (_, _, v) in enumerate(specs)], name="save_part")
        s0 = tf.raw_ops.SaveV2(prefix=tf.constant(temp[0], name="prefix_shard0"),
                               tensor_names=["f32", "i64", "str"], shape_and_slices=[""] * 3,
                               tensors=[consts[0], consts[5], consts[8]], name="save_shard0")
        s1 = tf.raw_ops.SaveV2(prefix=tf.constant(temp[1], name="prefix_shard1"),
                               tensor_names=["f64", "u8"], shape_and_slices=[""] * 2,
                               tensors=[consts[3], consts[6]], name="save_shard1")
        with tf.control_dependencies([s0, s1]):
            tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=temp, destination_prefix=p["sharded"],
                                          delete_old_dirs=True, name="merge")
    want = {"basic": {k: np.asarray(v) for k, v in tensors.items()},
            "part": {"emb": PART_EMB, "cols": PART_COLS, "plain": np.array([7, 8], np.int64)},
            "sharded": {k: np.asarray(tensors[k]) for k in ("f32", "i64", "str", "f64", "u8")}}
    return g, ["save_basic", "save_part", "merge"], p, want


def files_under(directory):
    return sorted(os.path.relpath(os.path.join(d, n), directory)
                  for d, _, names in os.walk(directory) for n in names)


def first_difference(path, tf_path):
    """None if the files are equal, else where they first differ (with the bytes there)."""
    if not os.path.exists(path):
        return f"{os.path.basename(path)} missing"
    a, b = open(path, "rb").read(), open(tf_path, "rb").read()
    if a == b:
        return None
    i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    return (f"{os.path.basename(path)} ({len(a)} bytes, TF {len(b)}) differs at byte {i}: "
            f"dflow {a[i:i + 12].hex()}, TF {b[i:i + 12].hex()}")


def index_entries(prefix):
    """(key, BundleEntryProto or header) pairs of a bundle's index, parsed in Python."""
    sys.path.insert(0, os.path.join(HERE, "data"))
    import gen_checkpoint_reference as ref
    return ref.table_entries(prefix + ".index")


def check_loaded(checks, label, prefix, want):
    """TensorFlow's list_variables/load_checkpoint of `prefix` against `want`."""
    try:
        listed = dict(tf.train.list_variables(prefix))
        reader = tf.train.load_checkpoint(prefix)
    except Exception as e:
        checks.check(False, f"{label}: TensorFlow cannot read dflow's checkpoint: {first_line(e)}")
        return
    checks.check(sorted(listed) == sorted(want),
                 f"{label}: tf.train.list_variables names {sorted(listed)}")
    dtypes = reader.get_variable_to_dtype_map()
    for name, value in want.items():
        if name not in listed:
            continue
        want_dtype = tf.as_dtype(value.dtype if value.dtype != object else tf.string)
        try:
            got = reader.get_tensor(name)
        except Exception as e:
            checks.check(False, f"{label}: {name}: {first_line(e)}")
            continue
        ok = (listed[name] == list(value.shape) and dtypes[name] == want_dtype
              and same(got, value))
        checks.check(ok, f"{label}: {name} {dtypes[name].name}{listed[name]} = {short(got, 100)}"
                     + ("" if ok else f"; want {want_dtype.name}{list(value.shape)} "
                        f"{short(value, 100)}"))


def case_tf_reads_dflow(dflow, tmp, checks):
    tf_dir, dflow_dir = os.path.join(tmp, "by_tf"), os.path.join(tmp, "by_dflow")
    # TensorFlow runs the same graph: the reference for the index keys and the files.
    # SaveV2 creates the prefix's directory but not its parent (TensorFlow's CreateDir), and
    # the sharded saves' "model_temp" directory lies in an existing checkpoint directory.
    for d in (tf_dir, dflow_dir):
        os.makedirs(os.path.join(d, "sharded"))
    g_tf, targets, p_tf, _ = save_graph(tf_dir)
    with tf1.Session(graph=g_tf) as sess:
        for t in targets:
            sess.run(g_tf.get_operation_by_name(t))
    g, targets, prefixes, want = save_graph(dflow_dir)
    path = write_graph(g, tmp, "save.pbtxt")
    args = ["run-graph", path] + [a for t in targets for a in ("--target", t)]
    rc, _, err = run_dflow(dflow, args)
    if not checks.check(rc == 0, f"dflow run-graph save.pbtxt --target {' --target '.join(targets)}"
                        + ("" if rc == 0 else f": {dflow_error(rc, err)}")):
        return
    for label in ("basic", "part", "sharded"):
        check_loaded(checks, label, prefixes[label], want[label])
        try:
            got_keys = [k for k, _ in index_entries(prefixes[label])]
            want_keys = [k for k, _ in index_entries(p_tf[label])]
        except Exception as e:
            checks.check(False, f"{label}: index unreadable: {first_line(e)}")
            continue
        checks.check(got_keys == want_keys, f"{label}: index keys are TensorFlow's: "
                     f"{[k.hex() for k in got_keys]}" +
                     ("" if got_keys == want_keys else f", TF: {[k.hex() for k in want_keys]}"))
        same_entries = index_entries(prefixes[label]) == index_entries(p_tf[label])
        directory = os.path.dirname(prefixes[label])
        tf_directory = os.path.dirname(p_tf[label])
        differ = [first_difference(os.path.join(directory, f), os.path.join(tf_directory, f))
                  for f in files_under(tf_directory)]
        differ = [d for d in differ if d]
        checks.info(f"{label}: index entries equal TensorFlow's: {same_entries}; files "
                    f"byte-identical to TensorFlow's: {'yes' if not differ else '; '.join(differ)}")
    got_files, want_files = (files_under(os.path.join(d, "sharded")) for d in (dflow_dir, tf_dir))
    checks.check(got_files == want_files, f"sharded: files after MergeV2Checkpoints {got_files}"
                 + ("" if got_files == want_files else f", TensorFlow leaves {want_files}"))


# --- c. dflow_reads_tf -----------------------------------------------------------------------

def golden():
    with open(os.path.join(GOLDEN, "expected.json")) as f:
        return json.load(f)


def expected_value(entry):
    """numpy value of an expected.json tensor entry."""
    shape = entry["shape"]
    if entry["dtype"] == "string":
        flat = np.array([bytes.fromhex(h) for h in entry["values"]] or [], dtype=object)
        return flat.reshape(shape)
    return np.array(entry["values"], dtype=entry["dtype"]).reshape(shape)


def restore_graph(prefix, entries, slices, name="restore"):
    """RestoreV2 nodes: `name` for entries (full tensors), `name`_slices for slices."""
    g = tf.Graph()
    with g.as_default():
        if entries:
            tf.raw_ops.RestoreV2(prefix=tf.constant(prefix, name="prefix"),
                                 tensor_names=[e["name"] for e in entries],
                                 shape_and_slices=[""] * len(entries),
                                 dtypes=[tf.as_dtype(e["dtype"]) for e in entries], name=name)
        if slices:
            tf.raw_ops.RestoreV2(prefix=tf.constant(prefix, name="prefix_s"),
                                 tensor_names=[e["name"] for e in slices],
                                 shape_and_slices=[e["shape_and_slice"] for e in slices],
                                 dtypes=[tf.as_dtype(e["dtype"]) for e in slices],
                                 name=name + "_slices")
    return g


def printable(entry):
    return entry["dtype"] != "string" or entry.get("utf8", False)


def parse_run_graph(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def json_tensor_matches(got, entry):
    """Whether one run-graph JSON tensor equals an expected.json entry."""
    if got.get("dtype") != DFLOW_DTYPE[entry["dtype"]] or got.get("shape") != entry["shape"]:
        return False
    values = got.get("values", [])
    if entry["dtype"] == "string":
        return [v.encode("utf-8").hex() for v in values] == entry["values"]
    if entry["dtype"] == "bool":
        return values == entry["values"]
    try:
        return same(np.array(values, dtype=entry["dtype"]).reshape(entry["shape"]),
                    expected_value(entry))
    except (ValueError, TypeError, OverflowError):
        return False


def case_dflow_reads_tf(dflow, tmp, checks):
    expected = golden()
    # 1. dflow run-graph: every tensor whose values JSON can print.
    for name, ck in expected.items():
        prefix = os.path.join(GOLDEN, ck["prefix"])
        # Reversed: dflow must not rely on the index's (sorted) order.
        entries = [e for e in reversed(ck["tensors"]) if printable(e)]
        slices = ck.get("slice_restores", [])
        path = write_graph(restore_graph(prefix, entries, slices), tmp, f"restore_{name}.pbtxt")
        fetches = [f"restore:{i}" for i in range(len(entries))] + \
                  [f"restore_slices:{i}" for i in range(len(slices))]
        rc, out, err = run_dflow(dflow, ["run-graph", path] +
                                 [a for f in fetches for a in ("--fetch", f)])
        if not checks.check(rc == 0, f"{name}: dflow run-graph restore_{name}.pbtxt "
                            f"({len(fetches)} fetches)" +
                            ("" if rc == 0 else f": {dflow_error(rc, err)}")):
            continue
        try:
            got = parse_run_graph(out)
        except ValueError as e:
            checks.check(False, f"{name}: run-graph output is not JSON lines: {e}: {out[:300]}")
            continue
        for fetch, entry, g in zip(fetches, entries + slices, got):
            label = entry["name"] + (f" [{entry['shape_and_slice']}]"
                                     if "shape_and_slice" in entry else "")
            ok = json_tensor_matches(g, entry)
            checks.check(ok, f"{name}: {label} via run-graph: {g.get('dtype')}{g.get('shape')} "
                         f"{short(g.get('values'), 100)}" +
                         ("" if ok else f"; want {entry['dtype']}{entry['shape']} "
                          f"{short(expected_value(entry), 100)}"))
        checks.check(len(got) == len(fetches), f"{name}: {len(got)} tensors printed")
    # 2. TensorFlow's client on a dflow server: every tensor, strings with any bytes.
    with dflow_cluster(dflow, tmp, {"worker": 1}, checks) as (cluster, _, _):
        target = "grpc://" + cluster["worker"][0]
        for name, ck in expected.items():
            prefix = os.path.join(GOLDEN, ck["prefix"])
            entries, slices = ck["tensors"], ck.get("slice_restores", [])
            g = restore_graph(prefix, entries, slices)
            outs = [g.get_tensor_by_name(f"restore:{i}") for i in range(len(entries))] + \
                   [g.get_tensor_by_name(f"restore_slices:{i}") for i in range(len(slices))]
            try:
                with tf1.Session(target, graph=g, config=tf1.ConfigProto(**SESSION_CONFIG)) as s:
                    values = s.run(outs)
            except tf.errors.OpError as e:
                checks.check(False, f"{name}: RestoreV2 through TensorFlow's client: "
                             f"{first_line(e)}")
                continue
            bad = [e["name"] + e.get("shape_and_slice", "")
                   for e, v in zip(entries + slices, values) if not same(v, expected_value(e))]
            checks.check(not bad, f"{name}: {len(values)} tensors restored through TensorFlow's "
                         f"client equal expected.json" + (f"; differ: {bad}" if bad else ""))
    # 3. Errors: a missing key, a wrong dtype, a corrupted data file.
    basic = expected["basic"]
    prefix = os.path.join(GOLDEN, basic["prefix"])
    f32 = next(e for e in basic["tensors"] if e["name"] == "f32_vector")
    bad_cases = [("missing key", prefix, [dict(f32, name="no_such_tensor")], "not found"),
                 ("wrong dtype", prefix, [dict(f32, dtype="int32")], None)]
    corrupt = os.path.join(tmp, "corrupt")
    shutil.copytree(os.path.dirname(prefix), corrupt)
    data_file = os.path.join(corrupt, "model.data-00000-of-00001")
    raw = bytearray(open(data_file, "rb").read())
    entry = next(r for r in basic["raw_index"] if r.get("key_hex") == b"f32_vector".hex())
    raw[entry["offset"] + 1] ^= 0x40
    open(data_file, "wb").write(bytes(raw))
    bad_cases.append(("flipped byte in the data file", os.path.join(corrupt, "model"), [f32], None))
    for label, pfx, entries, needle in bad_cases:
        path = write_graph(restore_graph(pfx, entries, []), tmp, "restore_bad.pbtxt")
        rc, out, err = run_dflow(dflow, ["run-graph", path, "--fetch", "restore:0"])
        ok = rc == 1 and (needle is None or needle in err)
        checks.check(ok, f"restore with a {label} fails: {dflow_error(rc, err)}" +
                     (f" (want exit 1{', ' + repr(needle) if needle else ''})" if not ok else ""))


# --- d. saver_on_cluster ---------------------------------------------------------------------

SAVED = {"w": (0.5 * np.arange(12) - 2.2).astype(np.float32).reshape(3, 4),
         "b": np.array([0.25, -1.0, 3.0, 1e-4], np.float32),
         "global_step": np.int64(7),
         "s": np.array([b"", "héllo wörld ✓".encode(), b"\x00\xff\x80"], dtype=object)}
OVERWRITE = {"w": np.zeros([3, 4], np.float32), "b": np.ones([4], np.float32),
             "global_step": np.int64(99), "s": np.array([b"o", b"v", b"r"], dtype=object)}


@contextlib.contextmanager
def variable_kind(kind):
    """Resource variables (TF2's default) or reference variables (TF1's VariableV2)."""
    if kind == "reference":
        tf1.disable_resource_variables()
    try:
        yield
    finally:
        tf1.enable_resource_variables()


def saver_graph(sharded, kind):
    g = tf.Graph()
    with g.as_default(), variable_kind(kind):
        with tf1.device(tf1.train.replica_device_setter(
                ps_tasks=2, worker_device="/job:worker/task:0")):
            variables = {
                "w": tf1.get_variable("w", shape=[3, 4], initializer=tf1.zeros_initializer()),
                "b": tf1.get_variable("b", shape=[4], initializer=tf1.zeros_initializer()),
                "global_step": tf1.train.get_or_create_global_step(),
                "s": tf1.get_variable("s", initializer=tf.constant([b"a", b"b", b"c"]),
                                      dtype=tf.string)}
        feeds = {k: tf1.placeholder(v.dtype.base_dtype, v.shape, name="feed_" + k)
                 for k, v in variables.items()}
        assign = tf.group(*[tf1.assign(variables[k], feeds[k]) for k in variables])
        init = tf1.global_variables_initializer()
        with tf.device("/job:worker/task:0"):
            reads = {k: tf.identity(v) for k, v in variables.items()}
        saver = tf1.train.Saver(sharded=sharded)
    return g, init, assign, feeds, reads, saver


def case_saver_on_cluster(dflow, tmp, checks):
    for sharded, kind in ((True, "resource"), (False, "resource"), (True, "reference")):
        label = f"Saver(sharded={sharded}), {kind} variables"
        g, init, assign, feeds, reads, saver = saver_graph(sharded, kind)
        gd = g.as_graph_def()
        checks.info(f"{label}: save ops: "
                    f"{format_ops(subgraph_ops(gd, [saver.saver_def.save_tensor_name]))}")
        checks.info(f"{label}: restore ops: "
                    f"{format_ops(subgraph_ops(gd, [saver.saver_def.restore_op_name]))}")
        directory = os.path.join(tmp, f"sharded_{sharded}_{kind}")
        os.makedirs(directory)
        with dflow_cluster(dflow, tmp, {"ps": 2, "worker": 1}, checks) as (cluster, _, _):
            target = "grpc://" + cluster["worker"][0]
            config = tf1.ConfigProto(**SESSION_CONFIG)
            try:
                with tf1.Session(target, graph=g, config=config) as sess:
                    sess.run(init)
                    sess.run(assign, {feeds[k]: v for k, v in SAVED.items()})
                    path = saver.save(sess, os.path.join(directory, "model"), global_step=7)
                    sess.run(assign, {feeds[k]: v for k, v in OVERWRITE.items()})
                    overwritten = sess.run(reads)
                    saver.restore(sess, path)
                    restored = sess.run(reads)
            except tf.errors.OpError as e:
                checks.check(False, f"{label}: {first_line(e)}")
                continue
            checks.check(all(same(overwritten[k], OVERWRITE[k]) for k in SAVED),
                         f"{label}: variables overwritten before the restore")
            ok = all(same(restored[k], SAVED[k]) for k in SAVED)
            checks.check(ok, f"{label}: save at step 7, restore: {short(restored, 200)}")
        shards = 2 if sharded else 1
        # model-7.meta: the MetaGraphDef, written by the client.
        want_files = sorted(["checkpoint", "model-7.index", "model-7.meta"] +
                            [f"model-7.data-{i:05d}-of-{shards:05d}" for i in range(shards)])
        got_files = files_under(directory)
        checks.check(got_files == want_files, f"{label}: files {got_files}" +
                     ("" if got_files == want_files else f", want {want_files}"))
        latest = tf.train.latest_checkpoint(directory)
        checks.check(latest == path, f"{label}: tf.train.latest_checkpoint = {latest}")
        check_loaded(checks, f"{label}: local TensorFlow", path, {
            k: np.asarray(v) for k, v in SAVED.items()})


# --- Clients (subprocesses) for e and f ------------------------------------------------------

FEATURES, CLASSES, EXAMPLES = 8, 3, 256
LEARNING_RATE = 0.5


def dataset():
    rng = np.random.RandomState(4321)
    x = rng.normal(size=(EXAMPLES, FEATURES)).astype(np.float32)
    true_w = rng.normal(size=(FEATURES, CLASSES)).astype(np.float32)
    y = np.argmax(x @ true_w + 0.1 * rng.normal(size=(EXAMPLES, CLASSES)), axis=1)
    return x, y.astype(np.int64)


def model(x, y):
    w = tf1.get_variable("weights", shape=[FEATURES, CLASSES],
                         initializer=tf1.random_normal_initializer(stddev=0.5, seed=7))
    b = tf1.get_variable("bias", shape=[CLASSES], initializer=tf1.zeros_initializer())
    logits = tf.matmul(x, w) + b
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                         logits=logits))


def saver_ops(graph):
    """Op types of the save and restore subgraphs of the graph's savers (SAVERS collection)."""
    gd = graph.as_graph_def()
    out = {}
    for saver in tf1.get_collection(tf1.GraphKeys.SAVERS, scope=None) or []:
        sd = saver.saver_def if hasattr(saver, "saver_def") else saver
        out["save"] = subgraph_ops(gd, [sd.save_tensor_name])
        out["restore"] = subgraph_ops(gd, [sd.restore_op_name])
        out["sharded"] = sd.sharded
    return out


def mts_client(spec):
    """One MonitoredTrainingSession run; writes {"first_step", "losses", "ops"} to spec.out."""
    faulthandler.dump_traceback_later(CLIENT_TIMEOUT_S - 10, exit=True)
    x, y = dataset()
    cluster = spec.get("cluster")
    if cluster:
        device_fn = tf1.train.replica_device_setter(
            cluster=tf.train.ClusterSpec(cluster), worker_device="/job:worker/task:0")
        master = "grpc://" + cluster["worker"][0]
        config = tf1.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"],
                                 **SESSION_CONFIG)
    else:
        device_fn, master, config = None, "", None
    with tf1.device(device_fn):
        loss = model(tf.constant(x), tf.constant(y))
        global_step = tf1.train.get_or_create_global_step()
        train_op = tf1.train.GradientDescentOptimizer(LEARNING_RATE).minimize(
            loss, global_step=global_step)
    hooks = [tf1.train.StopAtStepHook(last_step=spec["last_step"])]
    losses = []
    with tf1.train.MonitoredTrainingSession(
            master=master, is_chief=True, checkpoint_dir=spec["checkpoint_dir"],
            save_checkpoint_steps=10, hooks=hooks, config=config, save_summaries_steps=None,
            save_summaries_secs=None, log_step_count_steps=None,
            stop_grace_period_secs=5) as sess:
        first_step = int(sess.run(global_step))
        while not sess.should_stop() and len(losses) < 2 * spec["last_step"]:
            _, value = sess.run([train_op, loss])
            losses.append(float(value))
        ops = saver_ops(tf1.get_default_graph())
    with open(spec["out"], "w") as f:
        json.dump({"first_step": first_step, "losses": losses, "ops": ops}, f)
    print(f"mts: first step {first_step}, {len(losses)} runs", flush=True)
    return 0


def supervisor_client(spec):
    """One between-graph Supervisor replica; writes {"losses", "steps"} to spec.out."""
    faulthandler.dump_traceback_later(CLIENT_TIMEOUT_S - 10, exit=True)
    index, sync, last_step = spec["index"], spec["sync"], spec["last_step"]
    cluster = spec["cluster"]
    is_chief = index == 0
    x, y = dataset()
    x, y = x[index::2], y[index::2]
    with tf1.device(tf1.train.replica_device_setter(
            cluster=tf.train.ClusterSpec(cluster), worker_device=f"/job:worker/task:{index}")):
        loss = model(tf.constant(x), tf.constant(y))
        global_step = tf1.train.get_or_create_global_step()
        opt = tf1.train.GradientDescentOptimizer(LEARNING_RATE)
        if sync:
            opt = tf1.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2,
                                                  total_num_replicas=2)
        train_op = opt.minimize(loss, global_step=global_step)
    kwargs = {}
    if sync:
        kwargs = dict(local_init_op=opt.chief_init_op if is_chief else opt.local_step_init_op,
                      ready_for_local_init_op=opt.ready_for_local_init_op)
        chief_queue_runner = opt.get_chief_queue_runner()
        # No initial tokens: a replica runs a step only for a token the chief gives after
        # each global step, so neither replica runs past step 20 and blocks on a token.
        init_tokens_op = opt.get_init_tokens_op(num_tokens=0)
    init_op = tf1.global_variables_initializer()
    sv = tf1.train.Supervisor(is_chief=is_chief, logdir=spec["logdir"], init_op=init_op,
                              global_step=global_step, save_model_secs=1, summary_op=None,
                              recovery_wait_secs=1, stop_grace_secs=5, **kwargs)
    config = tf1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"],
                             **SESSION_CONFIG)
    master = "grpc://" + cluster["worker"][index]
    losses, steps, final_step = [], [], []

    def train(sess):
        # A barrier, so both replicas train: the non-chief gets its session only once the
        # chief has initialized the model (it polls every recovery_wait_secs). Async, one
        # replica may still take every step; the checks allow that.
        open(os.path.join(spec["ready_dir"], f"replica{index}_ready"), "w").close()
        other = os.path.join(spec["ready_dir"], f"replica{1 - index}_ready")
        deadline = time.time() + 60
        while not os.path.exists(other) and time.time() < deadline:
            time.sleep(0.01)
        step = int(sess.run(global_step))
        while not sv.should_stop() and step < last_step and len(losses) < 10 * last_step:
            _, value = sess.run([train_op, loss])
            step = int(sess.run(global_step))
            losses.append(float(value))
            steps.append(step)
        final_step.append(step)

    def wait_for_checkpoint():
        """The chief: until Supervisor's timer thread has saved step >= last_step."""
        deadline = time.time() + 20
        while time.time() < deadline:
            path = tf.train.latest_checkpoint(spec["logdir"])
            if path and int(path.rsplit("-", 1)[1]) >= last_step:
                return path
            time.sleep(0.2)
        return None

    saved = None
    if not sync:
        with sv.managed_session(master, config=config) as sess:
            train(sess)
            if is_chief:
                saved = wait_for_checkpoint()
    else:
        sess = sv.prepare_or_wait_for_session(master, config=config)
        if is_chief:
            sv.start_queue_runners(sess, [chief_queue_runner])
            sess.run(init_tokens_op)
        train(sess)
        if is_chief:
            saved = wait_for_checkpoint()
        # The chief queue runner's thread stays blocked in the accumulators' TakeGrad
        # (no more gradients come): stop without waiting for it, as SyncReplicas users did.
        sv.request_stop()
        sv.stop(ignore_live_threads=True)
    with open(spec["out"], "w") as f:
        json.dump({"losses": losses, "steps": steps, "saved": saved, "final_step": final_step[0],
                   "ops": saver_ops(tf1.get_default_graph())}, f)
    print(f"replica {index}: {len(losses)} runs, steps {steps[:1]}..{final_step}, "
          f"saved {saved}", flush=True)
    sys.stdout.flush()
    # A sync chief's queue-runner thread may still be blocked in a remote call.
    os._exit(0)


def start_client(kind, spec, log_path):
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--client", kind, "--spec", json.dumps(spec)],
        stdout=log, stderr=subprocess.STDOUT)
    return proc, log, log_path


def wait_clients(clients, checks, label):
    """Waits (bounded) for client subprocesses; returns their outputs (None where failed)."""
    deadline = time.time() + CLIENT_TIMEOUT_S
    results = []
    for i, (proc, log, log_path) in enumerate(clients):
        try:
            code = proc.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            code = f"timed out after {CLIENT_TIMEOUT_S}s"
        log.close()
        with open(log_path) as f:
            text = f.read()
        if not checks.check(code == 0, f"{label}: client {i} exit {code}"):
            tail = [ln for ln in text.splitlines() if ln.strip()][-12:]
            print("    --- client log (tail) ---\n" + "\n".join("      " + ln for ln in tail))
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            errors = [k for k, ln in enumerate(lines) if "Error" in ln and not ln.startswith("^")]
            if errors:
                # The exception line and the message lines after it (TensorFlow puts the
                # message on the next line after "Graph execution error:").
                message = " | ".join(lines[errors[-1]:errors[-1] + 3])
                checks.failures[-1] += f": {message[:500]}"
        results.append(code)
    return results


def kill_clients(clients):
    for proc, log, _ in clients:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def read_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def checkpoint_steps(directory):
    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return []
    return sorted(int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths)


# --- e. monitored_resume ---------------------------------------------------------------------

def run_mts(dflow, tmp, checks, label, cluster_tasks, checkpoint_dir, last_step):
    """One MTS client run (on a fresh dflow cluster, or local TF when cluster_tasks is None);
    returns its output or None."""
    out = os.path.join(tmp, f"{label.replace(' ', '_')}.json")
    spec = {"checkpoint_dir": checkpoint_dir, "last_step": last_step, "out": out}
    log_path = out[:-5] + ".log"
    def run_client():
        clients = [start_client("mts", spec, log_path)]
        try:
            return wait_clients(clients, checks, label)
        finally:
            kill_clients(clients)

    if cluster_tasks is None:
        codes = run_client()
    else:
        with dflow_cluster(dflow, tmp, cluster_tasks, checks) as (cluster, _, _):
            spec["cluster"] = cluster
            codes = run_client()
    return read_json(out) if codes == [0] else None


def compare_losses(checks, label, got, want, tol=1e-5):
    if got is None or want is None:
        return
    n = min(len(got["losses"]), len(want["losses"]))
    diffs = [abs(a - b) for a, b in zip(got["losses"], want["losses"])]
    ok = len(got["losses"]) == len(want["losses"]) and n > 0 and max(diffs) <= tol
    checks.check(ok, f"{label}: {len(got['losses'])} losses "
                 f"{got['losses'][0] if n else '-'} -> {got['losses'][-1] if n else '-'}, "
                 f"local TensorFlow {len(want['losses'])}; max |difference| "
                 f"{max(diffs) if diffs else float('nan'):.2e} (tolerance {tol:g})")


def case_monitored_resume(dflow, tmp, checks):
    local_dir = os.path.join(tmp, "local")
    local = [run_mts(dflow, tmp, checks, "local TF to 30", None, local_dir, 30)]
    local.append(run_mts(dflow, tmp, checks, "local TF resume to 40", None, local_dir, 40))
    local_steps = checkpoint_steps(local_dir)
    checks.info(f"local TensorFlow: checkpoints at steps {local_steps}")
    if local[0]:
        for part in ("save", "restore"):
            ops = local[0]["ops"]
            checks.info(f"MonitoredTrainingSession's Saver (sharded={ops.get('sharded')}, "
                        f"local) {part} ops: {format_ops(ops.get(part, {}))}")
    for ps in (1, 2):
        tasks = {"ps": ps, "worker": 1}
        directory = os.path.join(tmp, f"ps{ps}")
        first = run_mts(dflow, tmp, checks, f"{ps} ps: to 30", tasks, directory, 30)
        if first is None:
            continue
        checks.check(first["first_step"] == 0 and len(first["losses"]) == 30,
                     f"{ps} ps: first run: starts at step {first['first_step']}, "
                     f"{len(first['losses'])} train steps")
        compare_losses(checks, f"{ps} ps: first run vs local", first, local[0])
        steps = checkpoint_steps(directory)
        checks.check(steps and steps[-1] == 30, f"{ps} ps: checkpoints at steps {steps}")
        for part in ("save", "restore"):
            checks.info(f"{ps} ps: MonitoredTrainingSession's Saver "
                        f"(sharded={first['ops'].get('sharded')}) {part} ops: "
                        f"{format_ops(first['ops'].get(part, {}))}")
        resumed = run_mts(dflow, tmp, checks, f"{ps} ps: fresh cluster, resume to 40", tasks,
                          directory, 40)
        if resumed is None:
            continue
        checks.check(resumed["first_step"] == 30,
                     f"{ps} ps: resumed run's first global step {resumed['first_step']} (want 30)")
        steps = checkpoint_steps(directory)
        checks.check(len(resumed["losses"]) == 10 and steps and steps[-1] == 40,
                     f"{ps} ps: resumed run: {len(resumed['losses'])} train steps, "
                     f"checkpoints at steps {steps}")
        compare_losses(checks, f"{ps} ps: resumed run vs local", resumed, local[1])
        try:
            step = tf.train.load_checkpoint(tf.train.latest_checkpoint(directory)).get_tensor(
                "global_step")
            checks.check(step == 40, f"{ps} ps: latest checkpoint's global_step {step}")
        except Exception as e:
            checks.check(False, f"{ps} ps: latest checkpoint unreadable: {first_line(e)}")


# --- f. supervisor ---------------------------------------------------------------------------

SV_LAST_STEP = 20


def case_supervisor(dflow, tmp, checks):
    for sync in (False, True):
        label = "sync (SyncReplicasOptimizer)" if sync else "async"
        logdir = os.path.join(tmp, "sync" if sync else "async")
        ready_dir = tempfile.mkdtemp(prefix="ready_", dir=tmp)
        with dflow_cluster(dflow, tmp, {"ps": 1, "worker": 2}, checks) as (cluster, _, _):
            clients = []
            try:
                for i in range(2):
                    spec = {"index": i, "sync": sync, "last_step": SV_LAST_STEP,
                            "cluster": cluster, "logdir": logdir, "ready_dir": ready_dir,
                            "out": os.path.join(tmp, f"sv_{sync}_{i}.json")}
                    clients.append(start_client("supervisor", spec,
                                                os.path.join(tmp, f"sv_{sync}_{i}.log")))
                codes = wait_clients(clients, checks, label)
            finally:
                kill_clients(clients)
        outs = [read_json(os.path.join(tmp, f"sv_{sync}_{i}.json")) for i in range(2)]
        for i, out in enumerate(outs):
            if out is None or codes[i] != 0:
                continue
            steps, losses = out["steps"], out["losses"]
            # Each replica stops once it sees SV_LAST_STEP. Async, it may have run any share
            # of the steps. Sync, a replica usually runs one step per global step, but one
            # that dequeues its token first may take both of a round's tokens and run twice
            # while the other waits a round (TensorFlow's token queue allows it), so the
            # counts per replica may differ; the total is checked below.
            ok = out["final_step"] >= SV_LAST_STEP and steps == sorted(steps) and (
                len(losses) < 2 or losses[-1] < losses[0])
            checks.check(ok, f"{label}: replica {i}: {len(steps)} runs, last global step seen "
                         f"{out['final_step']}, loss "
                         f"{losses[0] if losses else '-'} -> {losses[-1] if losses else '-'}")
        if all(outs):
            # Sync: every global step aggregates one gradient from each of the 2 replicas
            # (stale ones are dropped), so 20 steps take at least 40 runs.
            want = 2 * SV_LAST_STEP if sync else SV_LAST_STEP
            runs = sum(len(out["steps"]) for out in outs)
            checks.check(runs >= want, f"{label}: {runs} runs in all (want >= {want})")
        if outs[0]:
            for part in ("save", "restore"):
                checks.info(f"{label}: Supervisor's Saver (sharded={outs[0]['ops'].get('sharded')})"
                            f" {part} ops: {format_ops(outs[0]['ops'].get(part, {}))}")
        path = tf.train.latest_checkpoint(logdir)
        try:
            step = tf.train.load_checkpoint(path).get_tensor("global_step") if path else None
        except Exception as e:
            step = f"unreadable: {first_line(e)}"
        checks.check(path is not None and isinstance(step, (int, np.integer)) and
                     step >= SV_LAST_STEP,
                     f"{label}: checkpoint in logdir: {path and os.path.basename(path)}, "
                     f"global_step {step}")


# --- Driver ----------------------------------------------------------------------------------

CASES = {
    "string_feed_fetch": case_string_feed_fetch,
    "tf_reads_dflow": case_tf_reads_dflow,
    "dflow_reads_tf": case_dflow_reads_tf,
    "saver_on_cluster": case_saver_on_cluster,
    "monitored_resume": case_monitored_resume,
    "supervisor": case_supervisor,
}


def run_case(name, fn, dflow):
    print(f"== {name}", flush=True)
    tmp = tempfile.mkdtemp(prefix=f"dflow_tf_checkpoint_{name}_")
    checks = Checks()
    start = time.time()
    try:
        fn(dflow, tmp, checks)
        reason = (f"{len(checks.failures)} check(s) failed; first: {checks.failures[0]}"
                  if checks.failures else "all checks passed")
        ok = not checks.failures
    except Exception as e:
        traceback.print_exc()
        ok, reason = False, first_line(e)
    elapsed = time.time() - start
    if ok:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        reason += f" (files kept in {tmp})"
    print(f"{'PASS' if ok else 'FAIL'} {name} ({elapsed:.1f}s): {reason}", flush=True)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dflow", nargs="?")
    parser.add_argument("--only", nargs="+", action="extend", choices=list(CASES),
                        metavar="NAME", help=f"cases to run: {', '.join(CASES)}")
    parser.add_argument("--client", choices=["mts", "supervisor"])
    parser.add_argument("--spec")
    args = parser.parse_args()
    if args.client:
        spec = json.loads(args.spec)
        return mts_client(spec) if args.client == "mts" else supervisor_client(spec)
    if not args.dflow:
        parser.error("path to the dflow binary is required")
    dflow = os.path.abspath(args.dflow)
    if not os.access(dflow, os.X_OK):
        print(f"FAIL: {dflow} is not an executable")
        return 1
    names = args.only or list(CASES)
    # SIGTERM (a runner's timeout) unwinds through the cases' finally blocks, which stop the
    # servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Last resort if a case's own bounds fail (the servers' watchdogs run first).
    faulthandler.dump_traceback_later(CASE_TIMEOUT_S * len(names) + 120, exit=True)
    results = {name: run_case(name, CASES[name], dflow) for name in names}
    failed = [n for n, ok in results.items() if not ok]
    print(f"{len(results) - len(failed)}/{len(results)} cases passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
