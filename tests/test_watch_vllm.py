"""kvviz watch against a real `vllm serve` of converted tiny on CPU (blocks of 32, prefix caching and KV events on),
started once for the module: the mirror, the trunk and branches, hits against the counter, evictions, replays,
malformed frames, restarts, stalls, gaps, https with a token, discovery, the CLI and the page. Skips, saying why,
where no interpreter with vLLM is found ($KVVIZ_VLLM_PYTHON); the bad-input tests need no vLLM.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("zmq")
pytest.importorskip("msgspec")
pytest.importorskip("prometheus_client")

BLOCK = 32
POOL = 64  # usable blocks (vLLM keeps one null block: num_gpu_blocks_override is one more)
SYSTEM = "You are a patient teaching assistant for a course on LLM inference; answer in one short line.".ljust(96)
assert len(SYSTEM.encode()) == 96
QUESTIONS = ("Why does a KV cache make decoding faster than recomputing every step?",
             "What happens to a request when the block pool runs out of room?",
             "How does prefix caching find a block that another request computed?",
             "Is a block of thirty-two tokens a good size for paged attention?")
NEW_TOKENS = 20
STARTUP_S = 300


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class VllmServer:
    """`vllm serve` of a checkpoint in its own process group, on 127.0.0.1; events on tcp://*:PORT (vLLM binds
    only a wildcard endpoint: any other it connects to)."""

    def __init__(self, python: str, model: Path, log: Path) -> None:
        self.python, self.model, self.log = python, model, log
        self.port, self.events_port, self.replay_port = (_free_port("127.0.0.1"), _free_port("0.0.0.0"),
                                                         _free_port("127.0.0.1"))
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{self.events_port}",
                  "replay_endpoint": f"tcp://127.0.0.1:{self.replay_port}", "topic": "kv-events"}
        cmd = [self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model), "--host",
               "127.0.0.1", "--port", str(self.port), "--dtype", "float32", "--enforce-eager", "--block-size",
               str(BLOCK), "--enable-prefix-caching", "--max-model-len", "1024", "--num-gpu-blocks-override",
               str(POOL + 1), "--max-num-seqs", "8", "--kv-events-config", json.dumps(config)]
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                   VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
        env.pop("PYTHONPATH", None)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                         start_new_session=True)
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"vllm serve ended during start-up: {self._tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(1)
        self.kill()
        pytest.fail(f"vllm serve did not start within {STARTUP_S} s: {self._tail()}")

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-1500:]

    def kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=60)
        self.proc = None

    def complete(self, prompt: str, new_tokens: int = NEW_TOKENS) -> tuple[list[int], list[int]]:
        """One greedy completion; (prompt token ids, generated token ids) as vLLM reports them."""
        body = json.dumps({"model": str(self.model), "prompt": prompt, "max_tokens": new_tokens, "temperature": 0,
                           "ignore_eos": True, "return_token_ids": True}).encode()
        req = urllib.request.Request(self.url + "/v1/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            choice = json.load(r)["choices"][0]
        return choice["prompt_token_ids"], choice["token_ids"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from kvviz.peers.vllm import find_vllm_python

    try:
        python = find_vllm_python()
    except ValueError as exc:
        pytest.skip(f"no vLLM to watch: {exc}")
    from kvviz.cli import main

    root = tmp_path_factory.mktemp("watch")
    assert main(["convert", "--model", "tiny", "--out", str(root / "tiny")]) == 0
    srv = VllmServer(python, root / "tiny", root / "vllm.log")
    srv.start()
    yield srv
    srv.kill()


def _session(server, record: Path | None = None):
    from kvviz.peers.watch.client import WatchOptions, address_of
    from kvviz.peers.watch.session import WatchSession

    address = address_of(server.url, events_port=server.events_port, replay_port=server.replay_port,
                         topic="kv-events")
    return WatchSession([address], WatchOptions(interval_s=0.25, timeout_s=2.0, backoff_max_s=2.0),
                        record=record).start()


def _cached_blocks(prompt: list[int], out: list[int]) -> list[tuple[int, ...]]:
    """The full blocks vLLM caches for a finished request: every token computed (the prompt and all generated
    tokens but the last, whose K/V no step computes), cut in blocks of 32."""
    tokens = prompt + out[:-1]
    return [tuple(tokens[i:i + BLOCK]) for i in range(0, len(tokens) - BLOCK + 1, BLOCK)]


@pytest.fixture(scope="module")
def shared(server, tmp_path_factory):
    """A recorded session over four requests sharing the system prompt, sent one after another; what it saw."""
    path = tmp_path_factory.mktemp("rec") / "shared.kvwatch"
    session = _session(server, path)
    assert session.wait_for(lambda h: h.servers[0].state == "up" and "replay" in h.servers[0].events, 60), \
        "the watcher never caught up from the replay socket"
    with session.lock:
        before = session.history.servers[0].last
        start_blocks = session.history.servers[0].blocks()
    requests = [server.complete(SYSTEM + q) for q in QUESTIONS]
    expected = [_cached_blocks(p, o) for p, o in requests]
    novel = {b for blocks in expected for b in blocks}
    want = start_blocks + len(novel)
    hits_after = before.prefix_hits + (len(QUESTIONS) - 1) * 3 * BLOCK

    def settled(h):
        s = h.servers[0]
        return s.blocks() >= want and s.last is not None and s.last.prefix_hits >= hits_after
    assert session.wait_for(settled, 30), "the mirror did not take the requests' blocks"
    time.sleep(0.6)  # two more samples: the effects of the last batch are folded into a point
    recorded = session.stop()
    return {"history": session.history, "requests": requests, "expected": expected, "start_blocks": start_blocks,
            "before": before, "path": recorded}


def test_the_mirror_holds_each_requests_blocks_with_their_tokens(shared):
    """Every full block vLLM caches for the four requests is in the mirror, with the request's own tokens (as
    vLLM returned them), once: the system prompt's three blocks are shared."""
    state = shared["history"].servers[0].mirror_state()
    chains = [tuple(state.tokens[r] for r in chain) for chain in state.chains()]
    for blocks in shared["expected"]:
        assert any(chain[:len(blocks)] == tuple(blocks) for chain in chains), "a request's chain is missing"
    distinct = {b for blocks in shared["expected"] for b in blocks}
    assert state.n_blocks == shared["start_blocks"] + len(distinct)


def test_a_shared_system_prompt_is_one_trunk_with_a_branch_per_request(shared):
    state = shared["history"].servers[0].mirror_state()
    system = tuple(shared["requests"][0][0][:3 * BLOCK])
    trunk = [s for s in state.segments() if s.parent < 0 and state.tokens[s.first] == system[:BLOCK]]
    assert len(trunk) == 1 and trunk[0].length == 3 and trunk[0].branches == len(QUESTIONS), state.shape_text()
    assert "a trunk of 3 blocks with 4 branches" in state.shape_text()


VLLM_DECODES = r"""
import json, sys
import msgspec
from msgspec.structs import fields
from vllm.distributed import kv_events as k
frames = json.load(open(sys.argv[1]))
dec = msgspec.msgpack.Decoder(type=k.KVEventBatch)
held = {}
for payload in frames:
    for e in dec.decode(bytes.fromhex(payload)).events:
        if isinstance(e, k.BlockStored):
            for h in e.block_hashes:
                held.setdefault(h if isinstance(h, int) else int.from_bytes(h, "big"), None)
        elif isinstance(e, k.BlockRemoved):
            for h in e.block_hashes:
                held.pop(h if isinstance(h, int) else int.from_bytes(h, "big"), None)
        elif isinstance(e, k.AllBlocksCleared):
            held.clear()
structs = {}
for name in ("EventBatch", "KVCacheEvent", "BlockStored", "BlockRemoved", "AllBlocksCleared", "KVEventBatch"):
    cls = getattr(k, name)
    cfg = cls.__struct_config__
    structs[name] = {"fields": [[f.name, str(f.type).replace(k.__name__ + ".", ""), repr(f.default)]
                                for f in fields(cls)],
                     "config": [cfg.array_like, cfg.omit_defaults, cfg.tag, cfg.tag_field]}
print(json.dumps({"held": [str(h) for h in held], "structs": structs}))
"""


def test_the_mirror_is_vllms_own_decoding_of_the_recorded_frames(shared, tmp_path):
    """The recorded frames decoded by vLLM's own KVEventBatch, blocks stored minus removed in order, give the
    mirror's blocks in the mirror's order; and kvviz's structs are vLLM's field by field."""
    from kvviz.peers.vllm import find_vllm_python
    from kvviz.peers.watch import events
    from kvviz.peers.watch.recording import Frame, RecordingReader

    payloads = [r.parts[2].hex() for r in RecordingReader(shared["path"]) if isinstance(r, Frame)]
    (tmp_path / "frames.json").write_text(json.dumps(payloads))
    (tmp_path / "decode.py").write_text(VLLM_DECODES)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    done = subprocess.run([find_vllm_python(), str(tmp_path / "decode.py"), str(tmp_path / "frames.json")],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    s = shared["history"].servers[0]
    assert [int(h) for h in theirs["held"]] == s.mirrors[0].keys()
    assert s.blocks() == s.counters.stored - s.counters.removed
    assert s.counters.malformed == 0 and s.counters.lost == 0 and s.counters.unknown_removed == 0
    from msgspec.structs import fields
    for name, want in theirs["structs"].items():
        cls = getattr(events, name)
        cfg = cls.__struct_config__
        ours = {"fields": [[f.name, str(f.type).replace(events.__name__ + ".", ""), repr(f.default)]
                           for f in fields(cls)],
                "config": [cfg.array_like, cfg.omit_defaults, cfg.tag, cfg.tag_field]}
        assert ours == want, name


def test_prefix_hits_inferred_from_the_events_equal_the_servers_counter(shared):
    """Each later request branches off the three cached blocks of the system prompt: the events say 3 blocks
    shared per branch, and vLLM's prefix_cache_hits counter grew by as many tokens."""
    s = shared["history"].servers[0]
    series = s.series()
    after = series["t"] > 0
    branched_tokens = series["branched"][after].sum() * BLOCK
    hits = s.last.prefix_hits - shared["before"].prefix_hits
    assert hits == (len(QUESTIONS) - 1) * 3 * BLOCK
    assert branched_tokens == hits
    assert any("of a cached prefix reused" in str(sentence) for _t, sentence in s.narration)


def test_a_recording_replays_to_the_same_mirror(shared):
    from kvviz.peers.watch.history import WatchHistory
    from kvviz.peers.watch.recording import RecordingReader, read_header

    live = shared["history"].servers[0]
    replayed = WatchHistory(read_header(shared["path"]))
    for record in RecordingReader(shared["path"]):
        replayed.apply(record)
    again = replayed.servers[0]
    assert again.mirrors[0].keys() == live.mirrors[0].keys()
    a, b = again.mirror_state(), live.mirror_state()
    assert a.tokens == b.tokens and (a.parent == b.parent).all()
    for key in ("blocks", "hits", "queries", "stored", "branched"):
        assert (again.series()[key] == live.series()[key]).all(), key
    assert [s for _t, s in again.narration] == [s for _t, s in live.narration]


def test_malformed_frames_are_counted_and_change_nothing(shared, tmp_path):
    """Real frames cut at every length, and frames of the wrong shape, among a recording's records: each is
    counted as malformed, none raises, and the mirror ends as without them."""
    from kvviz.peers.watch.events import MalformedFrame, decode_frame
    from kvviz.peers.watch.history import WatchHistory
    from kvviz.peers.watch.recording import Frame, RecordingReader, read_header

    records = list(RecordingReader(shared["path"]))
    frames = [r for r in records if isinstance(r, Frame)]
    real = frames[0].parts
    bad = [(real[0], real[1], real[2][:n]) for n in range(len(real[2]))] + [real[:2], (real[0], b"\x00" * 3, real[2])]
    for parts in bad:
        try:
            decode_frame(parts)
        except MalformedFrame:
            continue
        pytest.fail(f"a cut frame of {len(parts[2]) if len(parts) == 3 else '?'} bytes decoded")
    mixed = WatchHistory(read_header(shared["path"]))
    for record in records:
        mixed.apply(record)
        if record is frames[0]:
            for parts in bad:
                mixed.apply(Frame(record.t, 0, 0, "live", parts))
    assert mixed.servers[0].counters.malformed == len(bad)
    assert mixed.servers[0].mirrors[0].keys() == shared["history"].servers[0].mirrors[0].keys()


def test_evictions_keep_the_mirror_equal_to_what_the_server_holds(server):
    """Distinct requests of 8 blocks each overflow the pool of 64: vLLM evicts cached blocks and says so; the
    mirror removes each one it had (none unknown) and never holds more than the pool."""
    session = _session(server)
    assert session.wait_for(lambda h: h.servers[0].state == "up" and "replay" in h.servers[0].events, 60)
    for i in range(12):
        server.complete(f"{i:02d} " + "distinct words for a long prompt " * 8, new_tokens=4)
    assert session.wait_for(lambda h: sum(p.removed for p in h.servers[0].points) > 0, 30), "no eviction seen"
    time.sleep(0.6)
    session.stop()
    s = session.history.servers[0]
    assert s.counters.unknown_removed == 0 and s.counters.dropped == 0 and s.counters.removed > 0
    # the catch-up replays the server's whole history, so stored minus removed is every block it still holds
    assert s.blocks() == s.counters.stored - s.counters.removed
    assert s.blocks() <= POOL
    assert any("evicted" in str(sentence) for _t, sentence in s.narration)


def test_a_server_killed_mid_watch_is_reported_and_followed_again(server):
    """Killed, the server is said to be down; started again on the same ports, it is said to be up, its restart
    is seen (process start time), the mirror starts empty and takes the new server's blocks."""
    session = _session(server)
    assert session.wait_for(lambda h: h.servers[0].state == "up" and "replay" in h.servers[0].events, 60)
    server.kill()
    assert session.wait_for(lambda h: h.servers[0].state == "down", 30), "the dead server was not reported"
    server.start()
    assert session.wait_for(lambda h: any("restarted" in str(s) for _t, s in h.servers[0].narration), 60)
    assert session.wait_for(lambda h: h.servers[0].state == "up", 30)
    prompt, out = server.complete(SYSTEM + QUESTIONS[0])
    want = len(_cached_blocks(prompt, out))
    assert session.wait_for(lambda h: h.servers[0].blocks() == want, 30), "the restarted server's blocks"
    session.stop()
    said = [str(s) for _t, s in session.history.servers[0].narration]
    down = next(i for i, s in enumerate(said) if "cannot reach" in s)
    assert any("answering again" in s for s in said[down:])
    state = session.history.servers[0].mirror_state()
    assert state.chains() and tuple(state.tokens[r] for r in state.chains()[0]) == tuple(_cached_blocks(prompt, out))


def test_a_replayed_recording_prints_a_json_object_per_interval(shared, capsys):
    from kvviz.cli import main

    assert main(["watch", "--replay", str(shared["path"]), "--json", "--interval", "0.2"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and {r["url"] for r in rows} == {shared["history"].servers[0].url}
    assert rows[-1]["blocks"] == shared["history"].servers[0].blocks()
    assert "a trunk of 3 blocks with 4 branches" in rows[-1]["tree"]
    assert any("of a cached prefix reused" in s for r in rows for s in r["narration"])


def test_the_page_of_a_recording_draws_the_trunk(shared, tmp_path):
    """`kvviz watch --replay FILE --page OUT.html`: one offline page whose tree is drawn (the trunk's colour in
    the tree panel's pixels, seen in Chromium) without a script error."""
    import shutil

    from kvviz.cli import main

    out = tmp_path / "watch.html"
    assert main(["watch", "--replay", str(shared["path"]), "--page", str(out), "--quiet"]) == 0
    page = out.read_text()
    data = json.loads(page.split('<script id="kvviz-data" type="application/json">')[1].split("</script>")[0])
    assert "a trunk of 3 blocks with 4 branches" in data["frames"][-1]["servers"][0]["trees"][0]["shape"]["en"]
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no Chromium to draw the page in")
    from PIL import Image

    shot = tmp_path / "shot.png"
    base = [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1280,800"]
    dom = subprocess.run(base + ["--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert 'data-errors="0"' in dom and 'data-frames="' in dom
    subprocess.run(base + [f"--screenshot={shot}", out.as_uri()], capture_output=True, timeout=120)
    import numpy as np

    img = np.asarray(Image.open(shot).convert("RGB"))[110:510, :850]  # the tree panel (two thirds, upper row)
    trunk = int((img == np.array([0x1F, 0x77, 0xB4], dtype=np.uint8)).all(axis=2).sum())
    assert trunk > 2000, trunk


@pytest.mark.parametrize("argv, words", [
    ([], "give a vLLM server's URL"),
    (["ftp://host:1"], "not an http:// or https:// URL"),
    (["http://127.0.0.1:1", "--page", "x.html"], "--page is written from a recording"),
    (["http://127.0.0.1:1", "--header", "no colon"], "give it as 'Name: value'"),
    (["http://127.0.0.1:1", "--interval", "0"], "--interval 0.0: at least"),
    (["--replay", "README.md"], "not a kvviz watch recording"),
])
def test_bad_input_is_one_line_and_exit_2(argv, words, capsys, tmp_path, monkeypatch):
    from kvviz.cli import main

    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    assert main(["watch", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and words in err, err


def test_two_urls_side_by_side_and_a_gap_caught_up_from_the_replay_socket(server, monkeypatch):
    """The server watched as two URLs: two threads, two mirrors that end equal. The second drops one live frame
    (as a full high-water mark would): it sees the gap and the real replay socket fills it, nothing lost."""
    from kvviz.peers.watch import client
    from kvviz.peers.watch.client import WatchOptions, address_of
    from kvviz.peers.watch.events import frame_seq
    from kvviz.peers.watch.session import WatchSession

    live = client.ServerWatcher._live
    dropped = []

    def dropping(self, s, parts):
        if self.index == 1 and not dropped and s.next is not None and s.synced and s.next > 0:
            dropped.append(frame_seq(parts))
            return
        live(self, s, parts)

    monkeypatch.setattr(client.ServerWatcher, "_live", dropping)
    urls = (server.url, server.url.replace("127.0.0.1", "localhost"))
    session = WatchSession([address_of(u, events_port=server.events_port, replay_port=server.replay_port)
                            for u in urls], WatchOptions(interval_s=0.25)).start()
    assert session.wait_for(lambda h: all(s.state == "up" and "replay" in s.events for s in h.servers), 60)
    for i, q in enumerate(QUESTIONS[:3]):
        server.complete(f"side {i} " + q * 2)
    assert session.wait_for(lambda h: h.servers[1].counters.gaps == 1 and
                            h.servers[0].mirrors[0].keys() == h.servers[1].mirrors[0].keys() and
                            h.servers[1].counters.frames > h.servers[1].counters.replayed, 30), "no gap caught up"
    session.stop()
    a, b = session.history.servers
    assert dropped and a.counters.gaps == 0 and b.counters.lost == 0
    assert a.mirrors[0].keys() == b.mirrors[0].keys() and a.blocks() > 0
    assert any("missed: catching up from the replay socket" in str(s) for _t, s in b.narration)


def test_https_with_a_bearer_token(server, tmp_path, capsys):
    """The server behind an https gateway that wants 'Authorization: Bearer ...': without the header the watcher
    says HTTP 401 and keeps trying; with it (and the gateway's certificate) it is up and follows the events."""
    import http.server
    import ssl
    import threading

    from kvviz.cli import main
    from kvviz.peers.watch.client import WatchOptions, address_of
    from kvviz.peers.watch.session import WatchSession

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.headers.get("Authorization") != "Bearer s3cret":
                self.send_response(401)
                self.end_headers()
                return
            with urllib.request.urlopen(server.url + self.path, timeout=5) as r:
                body = r.read()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{httpd.server_address[1]}"
    try:
        refused = WatchSession([address_of(url, events_port=server.events_port, replay_port=server.replay_port)],
                               WatchOptions(interval_s=0.25, cafile=str(cert))).start()
        assert refused.wait_for(lambda h: any("HTTP 401" in str(s) for _t, s in h.servers[0].narration), 30)
        refused.stop()
        assert refused.history.servers[0].state == "down"
        code = main(["watch", url, "--header", "Authorization: Bearer s3cret", "--cacert", str(cert), "--events-port",
                     str(server.events_port), "--replay-port", str(server.replay_port), "--duration", "3", "--json",
                     "--interval", "0.5"])
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert code == 0 and rows[-1]["state"] == "up" and "caught up from the replay socket" in rows[-1]["events"]
    finally:
        httpd.shutdown()


def test_a_stalled_server_is_reported_and_followed_when_it_moves_again(server):
    """The server's processes stopped (SIGSTOP): /metrics no longer answers in time and the watcher says the
    server is stalled; continued (SIGCONT), it is up again and its new blocks reach the mirror."""
    from kvviz.peers.watch.client import WatchOptions, address_of
    from kvviz.peers.watch.session import WatchSession

    session = WatchSession([address_of(server.url, events_port=server.events_port, replay_port=server.replay_port)],
                           WatchOptions(interval_s=0.25, timeout_s=1.0, backoff_max_s=1.0)).start()
    try:
        assert session.wait_for(lambda h: h.servers[0].state == "up" and "replay" in h.servers[0].events, 60)
        os.killpg(server.proc.pid, signal.SIGSTOP)
        try:
            assert session.wait_for(lambda h: h.servers[0].state == "stalled", 30), "the stall was not reported"
        finally:
            os.killpg(server.proc.pid, signal.SIGCONT)
        assert session.wait_for(lambda h: h.servers[0].state == "up", 30)
        before = session.history.servers[0].blocks()
        prompt, out = server.complete("after the stall " + QUESTIONS[1] * 3)
        assert session.wait_for(lambda h: h.servers[0].blocks() > before, 30)
    finally:
        session.stop()
    said = [str(s) for _t, s in session.history.servers[0].narration]
    stall = next(i for i, s in enumerate(said) if "did not answer within 1 s" in s)
    assert any("answering again" in s for s in said[stall:])


def test_the_server_says_where_its_events_are(server, capsys):
    """Given only the URL, kvviz watch asks the server's /kv_event_sources where its KV events are (the wildcard
    host replaced by the URL's) and follows them."""
    from kvviz.cli import main

    assert main(["watch", server.url, "--duration", "2", "--json", "--interval", "0.5"]) == 0
    out = capsys.readouterr()
    assert (f"KV events of 1 rank at tcp://127.0.0.1:{server.events_port}, replay "
            f"tcp://127.0.0.1:{server.replay_port}, topic 'kv-events'") in out.err
    rows = [json.loads(line) for line in out.out.splitlines()]
    assert rows[-1]["state"] == "up" and "caught up from the replay socket" in rows[-1]["events"]
