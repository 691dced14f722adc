#!/usr/bin/env python3
"""Opt-in security on real `dflow server` processes (SECURITY.md).

With a shared token (--auth-token-file): TensorFlow's own client
(tf.compat.v1.Session("grpc://...")) and `dflow run-graph` without the token or
with a wrong one are UNAUTHENTICATED naming what is missing; with the right
token a graph spanning the ps and a worker runs; a raw TCP client to the ps's
tensor data plane gets "not served" and the close, no tensor. With mutual TLS
(certificates made by the `openssl` command) plus the token: plaintext clients
and clients with a certificate from another CA fail the handshake, the right
certificate works. `dflow cluster --auth-token-file` and `dflow cluster
--secure` train the MLP a few steps, and --secure leaves no files behind.

Parts needing TensorFlow or the `openssl` command say SKIP where those are
absent; the rest always runs (the test never skips as a whole).

Usage: security_test.py path/to/dflow
"""
import glob
import hashlib
import hmac
import json
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import textwrap

from dflow_cluster import start_cluster

DFLOW = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="dflow_security_test_")
failures = []

# v = [1, 2, 3] assigned on the ps; `doubled` = 2 * v computed on the worker (v
# crosses tasks).
GRAPH = """
node { name: "v" op: "VariableV2" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: 3 } } } } }
node { name: "init_value" op: "Const" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } }
    float_val: 1 float_val: 2 float_val: 3 } } } }
node { name: "init" op: "Assign" input: "v" input: "init_value" device: "/job:ps/task:0"
  attr { key: "T" value { type: DT_FLOAT } } }
node { name: "two" op: "Const" device: "/job:worker/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 2 } } } }
node { name: "doubled" op: "Mul" input: "init" input: "two"
  device: "/job:worker/task:0" attr { key: "T" value { type: DT_FLOAT } } }
"""

# TensorFlow's client in its own process (bounded by a timeout): prints
# "OK <value>" or "ERROR <class>: <message>".
TF_CLIENT = textwrap.dedent("""
    import os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(21.0) * 2
    config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=15000)
    try:
        with tf.compat.v1.Session(sys.argv[1], graph=g, config=config) as s:
            print("OK", s.run(x))
    except Exception as e:
        print("ERROR", type(e).__name__ + ":", " ".join(str(e).split())[:800])
""")


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail[-2000:]), flush=True)
    if not ok:
        failures.append(name)


def private_file(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def run_graph(target, args=()):
    graph = os.path.join(TMP, "graph.pbtxt")
    with open(graph, "w") as f:
        f.write(GRAPH)
    config = os.path.join(TMP, "config.pbtxt")
    with open(config, "w") as f:
        f.write("operation_timeout_in_ms: 10000\n")
    cmd = [DFLOW, "run-graph", graph, "--target", target, "--config", config, "--fetch",
           "doubled:0", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def doubled_ok(rc, out):
    return rc == 0 and '"values":[2.0,4.0,6.0]' in out.replace(" ", "")


def have_tensorflow():
    return subprocess.run([sys.executable, "-c", "import tensorflow"],
                          capture_output=True).returncode == 0


def tf_client(target):
    try:
        p = subprocess.run([sys.executable, "-c", TF_CLIENT, target], capture_output=True,
                           text=True, timeout=120)
        return p.stdout.strip() or p.stderr.strip()[-500:]
    except subprocess.TimeoutExpired:
        return "TIMEOUT (no answer within 120 s)"


def data_plane_port(server):
    m = re.search(r"tensor data plane on port (\d+)", server.output())
    return int(m.group(1)) if m else 0


def request_frame():
    """A well-framed RecvTensor request for a key no step will send."""
    body = b"\x08\x01\x12\x09a;b;c;d;e"  # step_id 1, rendezvous_key "a;b;c;d;e"
    return struct.pack("<IIQ", 0x51524644, len(body), 5_000_000) + body


def hello_frame(token_file):
    with open(token_file) as f:
        token = f.read().strip().encode()
    return struct.pack("<IIQ", 0x4c484644, len(token), 0) + token


def raw_data_plane_request(port, frame=None, tls=None):
    """Sends `frame` (default: a request without a hello), over TLS when `tls`
    (an ssl.SSLContext) is given; every byte back, or the TLS error's text."""
    frame = request_frame() if frame is None else frame
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            s = tls.wrap_socket(raw) if tls else raw
            s.sendall(frame)
        except (ssl.SSLError, OSError) as e:
            return f"<{type(e).__name__}: {e}>".encode()
        try:
            while len(got) < 1 << 20:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        except socket.timeout:
            got += b"<timeout>"
        except ConnectionResetError:
            pass  # Closed with our request unread: the end, as a close.
        except (ssl.SSLError, OSError) as e:
            got += f"<{type(e).__name__}: {e}>".encode()
    return got


def tls13_exporter(secret, hash_name, label, length):
    """RFC 8446 section 7.5's TLS-Exporter(label, "", length) from the
    session's exporter secret."""
    size = hashlib.new(hash_name).digest_size

    def expand_label(key, name, context, n):
        full = b"tls13 " + name
        info = struct.pack(">H", n) + bytes([len(full)]) + full + bytes([len(context)]) + context
        out, block, i = b"", b"", 1
        while len(out) < n:  # HKDF-Expand (RFC 5869)
            block = hmac.new(key, block + info + bytes([i]), hash_name).digest()
            out, i = out + block, i + 1
        return out[:n]

    empty = hashlib.new(hash_name, b"").digest()
    return expand_label(expand_label(secret, label, empty, size), b"exporter", empty, length)


def sealed_data_plane_request(port, frame, args):
    """Speaks the TLS data plane as data_plane_connection.h documents it,
    written here from that text: a TLS 1.3 handshake (Python's ssl, ALPN
    dflow-dp/2), then AES-128-GCM records keyed from the session's exporter
    (its secret read from the key log). Sends `frame` in one record; returns
    the plaintext of the first record back, or the error's text."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    keylog = os.path.join(tempfile.mkdtemp(dir=TMP), "keylog")
    ctx = tls_context(args)
    ctx.set_alpn_protocols(["dflow-dp/2"])
    ctx.keylog_filename = keylog
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            s = ctx.wrap_socket(raw)
        except (ssl.SSLError, OSError) as e:
            return f"<{type(e).__name__}: {e}>".encode()
        with s, socket.socket(fileno=os.dup(s.fileno())) as plain:
            plain.settimeout(10)
            if s.selected_alpn_protocol() != "dflow-dp/2":
                return b"<no ALPN agreed>"
            secret = next(bytes.fromhex(line.split()[2]) for line in open(keylog)
                          if line.startswith("EXPORTER_SECRET"))
            hash_name = "sha384" if s.cipher()[0].endswith("SHA384") else "sha256"
            keys = tls13_exporter(secret, hash_name, b"EXPERIMENTAL dflow data plane records v2", 56)
            to_client, to_server = AESGCM(keys[0:16]), AESGCM(keys[16:32])
            iv_to_client, iv_to_server = keys[32:44], keys[44:56]

            def nonce(iv, seq):
                return bytes(a ^ b for a, b in zip(iv, b"\0" * 4 + struct.pack(">Q", seq)))

            def read(n):
                out = b""
                while len(out) < n:
                    chunk = plain.recv(n - len(out))
                    if not chunk:
                        raise ConnectionError("closed")
                    out += chunk
                return out

            try:
                # The sender's one session ticket, a TLS record, comes first.
                read(struct.unpack(">3xH", read(5))[0])
                header = struct.pack(">I", len(frame))
                plain.sendall(header + to_server.encrypt(nonce(iv_to_server, 0), frame, header))
                header = read(4)
                body = read(struct.unpack(">I", header)[0] + 16)
                return to_client.decrypt(nonce(iv_to_client, 0), body, header)
            except Exception as e:  # noqa: BLE001 - the text is the result
                return f"<{type(e).__name__}: {e}>".encode()


def tls_context(args, ca_args=None):
    """A client SSLContext with the certificate and key of make_tls's `args`,
    trusting the CA of `ca_args` (default: the same)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations((ca_args or args)[5])
    ctx.load_cert_chain(args[1], args[3])
    return ctx


def stop_all(servers):
    for group in servers.values():
        for s in group:
            s.stop()


def token_cluster(token_file, wrong_file, tf_ok):
    _, ports, servers = start_cluster(DFLOW, TMP, {"ps": 1, "worker": 1},
                                      extra_args=["--auth-token-file", token_file])
    target = f"grpc://127.0.0.1:{ports['worker'][0]}"
    try:
        check("the server says it requires a token",
              "auth token required" in servers["worker"][0].output(),
              servers["worker"][0].output())
        rc, out = run_graph(target)
        check("run-graph without a token is UNAUTHENTICATED: missing auth token",
              rc != 0 and "UNAUTHENTICATED" in out and "missing auth token" in out, out)
        rc, out = run_graph(target, ["--auth-token-file", wrong_file])
        check("run-graph with a wrong token is UNAUTHENTICATED: wrong auth token",
              rc != 0 and "UNAUTHENTICATED" in out and "wrong auth token" in out, out)
        rc, out = run_graph(target, ["--auth-token-file", token_file])
        check("run-graph with the right token computes across ps and worker",
              doubled_ok(rc, out), out)
        port = data_plane_port(servers["ps"][0])
        check("the ps serves a data plane", port != 0, servers["ps"][0].output())
        if port:
            got = raw_data_plane_request(port)
            not_served = len(got) == 32 and struct.unpack("<II", got[:8]) == (0x53524644, 4)
            check("a raw TCP client without the token gets only 'not served' from the data "
                  "plane", not_served, repr(got[:64]))
        if tf_ok:
            out = tf_client(target)
            check("TensorFlow's client without a token is refused (UNAUTHENTICATED)",
                  out.startswith("ERROR UnauthenticatedError") and "missing auth token" in out,
                  out)
    finally:
        stop_all(servers)


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_tls(name):
    """A CA and a certificate it signs for 127.0.0.1/localhost, via `openssl`."""
    d = os.path.join(TMP, name)
    os.makedirs(d)
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                "extendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem",
            "-subj", f"/CN={name} CA", "-days", "2",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", *ec, "-keyout", f"{d}/key.pem", "-out", f"{d}/req.csr", "-subj", "/CN=localhost")
    openssl("x509", "-req", "-in", f"{d}/req.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
            "-CAcreateserial", "-out", f"{d}/cert.pem", "-days", "2", "-extfile", ext)
    os.chmod(f"{d}/key.pem", 0o600)
    return ["--tls-cert", f"{d}/cert.pem", "--tls-key", f"{d}/key.pem", "--tls-ca", f"{d}/ca.pem"]


def tls_cluster(token_file, tf_ok):
    tls, other = make_tls("good"), make_tls("other")
    auth = ["--auth-token-file", token_file]
    _, ports, servers = start_cluster(DFLOW, TMP, {"ps": 1, "worker": 1}, extra_args=tls + auth)
    target = f"grpc://127.0.0.1:{ports['worker'][0]}"
    try:
        port = data_plane_port(servers["ps"][0])
        check("under TLS the ps serves a mutual-TLS data plane",
              port != 0 and "(mutual TLS)" in servers["ps"][0].output(), servers["ps"][0].output())
        if port:
            got = raw_data_plane_request(port)
            check("a plaintext TCP client gets no data-plane frame from it (at most a TLS alert)",
                  b"DFRS" not in got and len(got) < 64, repr(got[:64]))
            hello = hello_frame(token_file)
            got = raw_data_plane_request(port, hello + request_frame(), tls_context(other, tls))
            check("a TLS client with a certificate from another CA is refused, no frame back",
                  b"DFRS" not in got and b"Error" in got, repr(got[:200]))
            got = sealed_data_plane_request(port, hello + request_frame(), tls)
            check("a TLS client with the right certificate and token, speaking the sealed "
                  "records as documented, is answered (a status frame: the key names no tensor)",
                  got[:4] == b"DFRS" and struct.unpack("<I", got[4:8])[0] == 0, repr(got[:200]))
        rc, out = run_graph(target, auth)
        check("a plaintext client fails the TLS handshake (UNAVAILABLE)",
              rc != 0 and "UNAVAILABLE" in out, out)
        rc, out = run_graph(target, other + auth)
        check("a client with a certificate from another CA is refused",
              rc != 0 and "UNAVAILABLE" in out, out)
        rc, out = run_graph(target, tls)
        check("the right certificate without the token is UNAUTHENTICATED",
              rc != 0 and "missing auth token" in out, out)
        rc, out = run_graph(target, tls + auth)
        check("the right certificate and token compute across ps and worker (over TLS)",
              doubled_ok(rc, out), out)
        if tf_ok:
            out = tf_client(target)
            print(f"     (TensorFlow's client against TLS: {out[:300]})")
            check("TensorFlow's plaintext client gets nothing from a TLS server",
                  not out.startswith("OK"), out)
    finally:
        stop_all(servers)


def cluster(args):
    p = subprocess.run([DFLOW, "cluster", *args, "--", "--data", "synthetic", "--max-steps", "5",
                        "--log-every", "1"], capture_output=True, text=True, timeout=240)
    return p.returncode, p.stdout + p.stderr


def main():
    tf_ok = have_tensorflow()
    has_openssl = shutil.which("openssl") is not None
    if not tf_ok:
        print("SKIP TensorFlow's client checks: TensorFlow cannot be imported here")
    if not has_openssl:
        print("SKIP the TLS checks with `openssl`-made certificates: no openssl command")
    token = private_file("token", "the-shared-token-0123\n")
    wrong = private_file("wrong", "not-the-token\n")

    token_cluster(token, wrong, tf_ok)
    if has_openssl:
        tls_cluster(token, tf_ok)

    rc, out = cluster(["--auth-token-file", token])
    check("dflow cluster --auth-token-file trains the MLP 5 steps",
          rc == 0 and "auth token" in out and "[worker0]" in out, out)
    before = set(glob.glob("/tmp/dflow_cluster_secure_*"))
    rc, out = cluster(["--secure"])
    check("dflow cluster --secure trains the MLP 5 steps with mutual TLS and a token",
          rc == 0 and "mutual TLS, auth token" in out and "[worker0]" in out, out)
    left = set(glob.glob("/tmp/dflow_cluster_secure_*")) - before
    check("dflow cluster --secure removes its throwaway files", not left, str(left))
    rc, out = cluster(["--secure", "--auth-token-file", token])
    check("--secure with a token file of one's own is refused", rc != 0 and "--secure" in out, out)

    shutil.rmtree(TMP, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failed: {failures}")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
