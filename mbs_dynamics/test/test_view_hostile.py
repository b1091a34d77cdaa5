"""The 3-D view against hostile browsers (issue 28): scene changes from
another thread while many browsers are connected, pages of other sites and
other names (DNS rebinding), malformed websocket messages, browsers that
never read, hosts it cannot serve on, a recording it cannot write; and, in
the bringup's one process, a view that fails while the simulator runs on.

Browsers are plain websocket clients in a process of their own (BROWSERS,
the `websockets` package) and headless Chromium."""
from __future__ import annotations

import asyncio
import functools
import http.client
import http.server
import re
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import msgspec
import numpy as np
import pytest
from browser import needs_chromium, open_page
from ros_processes import executable, node_status, spin_until

import mbs_dynamics as mbs
from mbs_dynamics.view.server import MAX_CONNECTIONS, MAX_MESSAGE_BYTES
from mbs_dynamics.view.viewer import Viewer

PROTOCOL = "viser-v1.1.1"

# COUNT websocket clients of URL (argv: URL COUNT MODE SECONDS) in one
# process: MODE read, each reads all it is sent; MODE silent, each completes
# the handshake and never reads a byte (a 4 kB receive buffer). Says
# "connected COUNT" once all are open, then after SECONDS what each read and
# how many connections ended, and exits.
BROWSERS = r"""
import asyncio, base64, os, socket, sys
from urllib.parse import urlsplit
import websockets.asyncio.client as client
url, count, mode, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
received = [0] * count

async def reading(k, opened):
    async with client.connect(url, subprotocols=["viser-v1.1.1"], max_size=None, open_timeout=120) as ws:
        opened.append(k)
        async for message in ws:
            received[k] += len(message)

async def silent(k, opened):
    parts = urlsplit(url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET / HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                  "Sec-WebSocket-Protocol: viser-v1.1.1\r\n\r\n").encode())
    opened.append(sock)
    await asyncio.sleep(3600)

async def main():
    opened = []
    tasks = [asyncio.create_task((reading if mode == "read" else silent)(k, opened)) for k in range(count)]
    while len(opened) < count:
        failed = [t for t in tasks if t.done()]
        if failed:
            print(f"a connection failed: {failed[0].exception()!r}", flush=True)
            return
        await asyncio.sleep(0.05)
    print(f"connected {count}", flush=True)
    before = list(received)
    await asyncio.sleep(seconds)
    ended = sum(t.done() for t in tasks)
    print(f"read at least {min(r - b for r, b in zip(received, before))} bytes each; {ended} connections ended",
          flush=True)
    for t in tasks:
        t.cancel()

asyncio.run(main())
"""


def browsers(start_process, url: str, count: int, mode: str, seconds: float):
    """BROWSERS in a process of their own, once all are connected."""
    process = start_process([sys.executable, "-c", BROWSERS, url.replace("http://", "ws://"), str(count), mode,
                             str(seconds)])
    process.wait_for(f"connected {count}", 180)
    return process


def http_get(port: int, host: str) -> tuple[int, bytes]:
    """GET / from the view on 127.0.0.1:port with the Host header `host`."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest("GET", "/", skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def open_websocket(port: int, origin: str | None = None, host: str | None = None, protocol: bool = True):
    """The first message's size (bytes) on a websocket to the view at
    127.0.0.1:port, as a page at `origin` under the name `host` opens it;
    the HTTP status of the refusal as a negative number."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    async def first() -> int:
        try:
            async with connect(f"ws://{host or f'127.0.0.1:{port}'}", host="127.0.0.1", port=port, origin=origin,
                               subprotocols=[PROTOCOL] if protocol else None, max_size=None,
                               open_timeout=30) as websocket:
                return len(await asyncio.wait_for(websocket.recv(), 30))
        except InvalidStatus as refusal:
            return -refusal.response.status_code

    return asyncio.run(first())


def quadruped_viewer(**options) -> tuple[mbs.Model, Viewer]:
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    return model, Viewer(model, Path(mbs.bundled_robot("quadruped")).read_text(), port=0, **options)


def test_scene_changes_from_another_thread_while_a_hundred_browsers_read(start_process):
    """Poses, contact forces and momentum set from this thread as fast as
    it goes while 100 browsers read the scene, threads switching every
    microsecond (the race of viser's asyncio.Event showed as "deque mutated
    during iteration" within seconds): no error, every browser reads on,
    none is dropped, and a browser that comes afterwards gets the scene."""
    model, viewer = quadruped_viewer()
    try:
        clients = browsers(start_process, viewer.url, 100, "read", 10.0)
        feet = ["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"]
        q, frames = model.neutral_configuration(), 0
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        deadline = time.monotonic() + 120
        try:
            while clients.process.poll() is None and time.monotonic() < deadline:
                q[7:] = 0.3 * np.sin(0.05 * frames + np.arange(model.nq - 7))
                viewer.show(q)
                viewer.show_contacts(feet, np.zeros((len(feet), 3)), np.full((len(feet), 3), 10.0 + frames % 7))
                viewer.show_momentum((0.0, 0.0, 0.3), (0.1 * (frames % 5), 0.0, 0.0), (0.0, 0.0, 0.2))
                frames += 1
                time.sleep(0.001)
        finally:
            sys.setswitchinterval(interval)
        result = clients.wait_for("read at least", 30)[0]
        print(f"{frames} frames set beside 100 browsers: {result}")
        read, ended = map(int, re.search(r"read at least (\d+) bytes each; (\d+) connections ended", result).groups())
        assert read > 0 and ended == 0, result
        assert open_websocket(viewer.server.get_port()) > 1000
    finally:
        viewer.close()


def test_the_view_serves_only_its_own_names_and_pages(tmp_path):
    """The page under a foreign Host (DNS rebinding) and a websocket from
    another site's page (or a file's: Origin null, or another port of this
    machine) are refused, each told once; the page's own origin, localhost
    and a client that sends no Origin (not a browser) are served, and
    allowed_origins admits one more site, under its name too."""
    told = []
    _, viewer = quadruped_viewer(allowed_origins=["http://Robot-PC.example:8080"],
                                 report=lambda reason, text: told.append((reason, text)))
    try:
        port = viewer.server.get_port()
        assert viewer.url == f"http://127.0.0.1:{port}/" and not viewer.every_interface
        status, page = http_get(port, f"127.0.0.1:{port}")
        assert status == 200 and b"<html" in page.lower()
        assert http_get(port, f"localhost:{port}")[0] == 200
        assert http_get(port, "robot-pc.example:8080")[0] == 200
        assert http_get(port, f"evil.example:{port}") == (403, b"This view is not served under that name.\n")
        assert told == [("host", f"a request for Host 'evil.example:{port}', not an address of this view "
                                 "(allowed_origins admits others)")]

        assert open_websocket(port, origin=f"http://127.0.0.1:{port}") > 1000
        assert open_websocket(port, origin=f"http://localhost:{port}", host=f"localhost:{port}") > 1000
        assert open_websocket(port) > 1000
        assert open_websocket(port, origin="http://robot-pc.example:8080", host="robot-pc.example:8080") > 1000
        assert open_websocket(port, origin="http://evil.example") == -403
        assert told[-1] == ("origin", "a websocket from the page of 'http://evil.example', another site's "
                                      "(allowed_origins admits others)")
        assert open_websocket(port, origin="null") == -403
        assert open_websocket(port, origin=f"http://localhost:{port + 1}", host=f"localhost:{port}") == -403
        assert open_websocket(port, origin="http://robot-pc.example:8080") > 1000  # behind a proxy: any Host
        assert open_websocket(port, origin=f"http://127.0.0.1:{port}", protocol=False) == -400
        assert told[-1] == ("protocol", f"a websocket that does not speak {PROTOCOL} (a page of another viser "
                                        "version: reload it)")
        assert viewer.refused == Counter(host=1, origin=3, protocol=1)
    finally:
        viewer.close()


def test_host_and_allowed_origins_that_cannot_be_served_are_said_at_once():
    """'' (every interface, which the log once called 127.0.0.1), a name (no
    lookup: evil.invalid hung in 1000 bind attempts) and an address not of
    this machine are refused in one line each, at once; 0.0.0.0 serves every
    interface under any IP address and this machine's name, not another's."""
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    xml = Path(mbs.bundled_robot("arm7")).read_text()
    for host, message in (("", "host '' would serve on every interface: give 0.0.0.0 for that, or 127.0.0.1"),
                          ("evil.invalid", "host 'evil.invalid' is not an IP address"),
                          ("192.0.2.1", "cannot serve on host 192.0.2.1 port 0: Cannot assign requested address")):
        start = time.monotonic()
        with pytest.raises(ValueError, match=re.escape(message)):
            Viewer(model, xml, host=host, port=0)
        assert time.monotonic() - start < 30
    with pytest.raises(ValueError, match="'robot-pc:8080' is not an origin such as http://robot-pc.local:8080"):
        Viewer(model, xml, port=0, allowed_origins=["robot-pc:8080"])
    viewer = Viewer(model, xml, host="0.0.0.0", port=0)
    try:
        port = viewer.server.get_port()
        assert viewer.every_interface and viewer.url == f"http://127.0.0.1:{port}/"
        import socket

        assert http_get(port, f"10.1.2.3:{port}")[0] == 200
        assert http_get(port, f"{socket.gethostname()}:{port}")[0] == 200
        assert http_get(port, f"rebound.example:{port}")[0] == 403
        assert open_websocket(port, origin=f"http://10.1.2.3:{port}", host=f"10.1.2.3:{port}") > 1000
    finally:
        viewer.close()


def test_malformed_messages_close_their_connection_only_and_are_counted():
    """Garbage binary and text frames, an unknown message type, a message
    with missing fields and one over MAX_MESSAGE_BYTES: each closes its own
    connection, counted and told in one line (no traceback); a request for
    viser's public share tunnel does nothing; the view serves on."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    told = []
    model, viewer = quadruped_viewer(report=lambda reason, text: told.append((reason, text)))
    port = viewer.server.get_port()

    async def send(payload) -> int | None:
        async with connect(f"ws://127.0.0.1:{port}", subprotocols=[PROTOCOL], max_size=None) as websocket:
            await websocket.recv()
            await websocket.send(payload)
            try:
                while True:
                    await asyncio.wait_for(websocket.recv(), 2.0)
            except ConnectionClosed as closed:
                return closed.rcvd.code if closed.rcvd else None
            except TimeoutError:
                return None  # still open

    try:
        garbage = [b"\x00not msgpack", "a text frame", msgspec.msgpack.encode({"type": "NoSuchMessage"}),
                   msgspec.msgpack.encode({"type": "ViewerCameraMessage", "wxyz": [1.0]})]
        assert [asyncio.run(send(payload)) for payload in garbage] == [1011] * 4
        assert asyncio.run(send(b"x" * (MAX_MESSAGE_BYTES + 1))) == 1009  # too big: closed before it is read
        assert asyncio.run(send(msgspec.msgpack.encode({"type": "ShareUrlRequest"}))) is None  # ignored
        assert viewer.server._share_tunnel is None
        assert viewer.refused == Counter(message=4)
        assert [text for _, text in told] == [
            "closed a browser connection on a malformed message (DecodeError: MessagePack data is malformed: "
            "trailing characters (byte 1))",
            "closed a browser connection on a malformed message (AssertionError)",
            "closed a browser connection on a malformed message (KeyError: 'NoSuchMessage')",
            told[3][1]]
        assert told[3][1].startswith("closed a browser connection on a malformed message (TypeError: ")
        viewer.show(model.neutral_configuration())
        assert open_websocket(port, origin=f"http://127.0.0.1:{port}") > 1000
    finally:
        viewer.close()


def rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_browsers_that_never_read_hold_bounded_memory(start_process):
    """40 browsers that open the websocket and never read a byte while the
    view sends 2000 contact forces (72 kB) 30 times a second: what would
    queue for them (about 700 MB in 8 s) does not, as viser keeps the newest
    state of each scene node only and websockets writes at most 32 kB ahead;
    the process grows by less than 100 MB, and a reading browser is served."""
    model, viewer = quadruped_viewer()
    try:
        q = model.neutral_configuration()
        viewer.show(q)
        frames, points = ["LF_FOOT"] * 2000, np.zeros((2000, 3))
        viewer.show_contacts(frames, points, np.ones((2000, 3)))
        silent = browsers(start_process, viewer.url, 40, "silent", 8.0)
        before, peak, sent = rss_mb(), 0.0, 0
        deadline = time.monotonic() + 120
        while silent.process.poll() is None and time.monotonic() < deadline:
            viewer.show_contacts(frames, points, np.full((2000, 3), 1.0 + sent % 10))
            sent += 1
            peak = max(peak, rss_mb())
            time.sleep(1 / 30)
        print(f"{sent} frames of 2000 contacts beside 40 browsers that never read: RSS {before:.0f} MB, "
              f"at most {peak:.0f} MB; {viewer.connections()} connections")
        assert "0 connections ended" in silent.wait_for("read at least", 30)[0]
        assert peak - before < 100
        assert open_websocket(viewer.server.get_port()) > 1000
    finally:
        viewer.close()


def test_websockets_beyond_the_most_open_are_refused(start_process):
    """MAX_CONNECTIONS + 12 websockets opened and held: the last 12 are
    refused (503) and counted; once the others close, a browser is served."""
    _, viewer = quadruped_viewer()
    try:
        held = browsers(start_process, viewer.url, MAX_CONNECTIONS + 12, "silent", 60.0)
        deadline = time.monotonic() + 60
        while viewer.refused["connections"] < 12 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert viewer.refused == Counter(connections=12) and viewer.connections() == MAX_CONNECTIONS
        assert open_websocket(viewer.server.get_port()) == -503
        held.kill()
        deadline = time.monotonic() + 60
        while viewer.connections() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert open_websocket(viewer.server.get_port()) > 1000
    finally:
        viewer.close()


# --- the view node ---------------------------------------------------------------------------


def diagnostics_of(test_node, name: str, statuses: list):
    """Collect the /diagnostics values of the node `name` (fully qualified) into `statuses` as (time, values)."""
    from diagnostic_msgs.msg import DiagnosticArray

    return test_node.create_subscription(
        DiagnosticArray, "/diagnostics",
        lambda m: statuses.append((time.monotonic(), node_status(m, name))) if node_status(m, name) else None, 50)


@needs_chromium
def test_fifty_browsers_and_chromium_while_the_simulator_runs(start_process, test_node):
    """The bringup (simulator and view, one process) with 50 reading
    browsers and a headless Chromium on the page for 10 s while the
    quadruped moves: the simulator publishes joint_states throughout, the
    view draws its world and on, and counts the connections, nothing is printed as a
    traceback, and Ctrl-C stops it all cleanly. Prints the frame rate and
    the process's memory."""
    import rclpy
    from sensor_msgs.msg import JointState

    statuses: list = []
    diagnostics_of(test_node, "/view", statuses)
    simulator: list = []
    diagnostics_of(test_node, "/simulator", simulator)
    states: list = []
    test_node.create_subscription(JointState, "/joint_states", lambda m: states.append(time.monotonic()), 50)
    bringup = start_process([executable("mbs_dynamics_bringup"), "--robot", "quadruped", "--nodes", "simulator",
                             "--view", "--ros-args", "-p", "view:port:=0", "-p", "diagnostics_period:=0.5"])
    url = re.search(r"open (http://127\.0\.0\.1:\d+/) in a browser", bringup.wait_for(r"open http://", 60)[0]).group(1)
    spin_until(test_node, lambda: len(states) > 50 and statuses, 60, "joint_states and the view's diagnostics")
    spin_until(test_node, lambda: int(statuses[-1][1].get("received_world", 0)) == 1, 10,
               "the simulator's world drawn by the view")
    alone = rss_mb(bringup.process.pid)
    clients = browsers(start_process, url, 50, "read", 10.0)
    with open_page(url):
        start, peak = time.monotonic(), alone
        first, first_simulator = len(statuses), len(simulator)
        while clients.process.poll() is None:
            rclpy.spin_once(test_node, timeout_sec=0.05)
            peak = max(peak, rss_mb(bringup.process.pid))
            assert time.monotonic() - start < 120, "the browsers never finished"
        during = [values for at, values in statuses[first:]]
    result = clients.wait_for("read at least", 30)[0]
    assert "0 connections ended" in result and bringup.process.poll() is None, bringup.output
    seconds = statuses[-1][0] - statuses[first][0]
    rate = (int(statuses[-1][1]["frames"]) - int(statuses[first][1]["frames"])) / seconds
    print(f"50 browsers and Chromium for {seconds:.1f} s: view {rate:.1f} frames/s, "
          f"connections up to {max(int(v['connections']) for v in during)}, browsers (camera) up to "
          f"{max(int(v['browsers']) for v in during)}, frame time {during[-1].get('frame_us_mean')} us mean; "
          f"bringup RSS {alone:.0f} MB alone, at most {peak:.0f} MB; "
          f"simulator's real-time factor {[v['real_time_factor'] for _, v in simulator[first_simulator::4]]}; "
          f"{result}")
    assert max(int(v["connections"]) for v in during) >= 50
    assert int(during[-1]["frames"]) > int(during[0]["frames"])  # drawing on
    count = len(states)
    spin_until(test_node, lambda: len(states) > count + 50, 30, "the simulator publishes on")
    assert bringup.interrupt() == 0
    assert "Traceback" not in bringup.output and "deque mutated" not in bringup.output


@needs_chromium
def test_a_page_of_another_site_cannot_read_the_view(start_process, test_node, tmp_path):
    """Headless Chromium opens a page of another site (served here on
    another port) whose script opens the view's websocket: refused (it
    read 177 kB of the scene before), counted in the view's diagnostics
    and warned once; with that site in allowed_origins the same page reads
    the scene."""
    page = """<html><body><script>
const ws = new WebSocket("ws://127.0.0.1:PORT", ["viser-v1.1.1"]);
ws.binaryType = "arraybuffer";
ws.onmessage = (e) => { fetch("/outcome?read=" + e.data.byteLength); ws.close(); };
ws.onerror = () => { fetch("/outcome?refused"); };
</script></body></html>"""
    outcomes: list[str] = []
    told = threading.Event()

    class Site(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/outcome?"):
                outcomes.append(self.path.split("?", 1)[1])
                told.set()
                self.send_response(204)
                self.end_headers()
            else:
                super().do_GET()

        def log_message(self, *args) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Site, directory=str(tmp_path)))
    threading.Thread(target=site.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{site.server_address[1]}"

    def outcome(view_port: int) -> str:
        """What the site's page, opened in Chromium, could do with the view's websocket."""
        (tmp_path / "page.html").write_text(page.replace("PORT", str(view_port)))
        outcomes.clear()
        told.clear()
        with open_page(f"{origin}/page.html"):
            assert told.wait(120), "the page never told what it could do"
        return outcomes[0]

    try:
        statuses: list = []
        diagnostics_of(test_node, "/view", statuses)
        arm = mbs.bundled_robot("arm7")
        view = start_process([executable("mbs_dynamics_view"), "--ros-args", "-p", f"robot_description_file:={arm}",
                              "-p", "port:=0", "-p", "diagnostics_period:=0.2"])
        port = int(re.search(r"open http://127\.0\.0\.1:(\d+)/", view.wait_for("open http://", 60)[0]).group(1))
        assert outcome(port) == "refused"
        view.wait_for(rf"dropped: view: a websocket from the page of '{re.escape(origin)}', another site's", 10)
        spin_until(test_node, lambda: statuses and int(statuses[-1][1].get("dropped_browser_origin", 0)) >= 1, 30,
                   "the refusal counted in /diagnostics")
        assert view.interrupt() == 0

        allowed = start_process([executable("mbs_dynamics_view"), "--ros-args", "-p",
                                 f"robot_description_file:={arm}", "-p", "port:=0", "-p",
                                 f"allowed_origins:=['{origin}']"])
        port = int(re.search(r"open http://127\.0\.0\.1:(\d+)/", allowed.wait_for("open http://", 60)[0]).group(1))
        read = outcome(port)
        assert read.startswith("read=") and int(read.split("=")[1]) > 1000, read
        assert allowed.interrupt() == 0
    finally:
        site.shutdown()


def test_the_view_node_counts_bad_browsers_in_one_line_and_serves_on(start_process, test_node):
    """A foreign Host, foreign origins and 20 malformed messages at the view
    node: each refused or its connection closed, counted in /diagnostics
    (dropped_browser_host, _origin, _message), warned in a throttled line per
    reason and never a traceback; the view draws the next joint_states."""
    from sensor_msgs.msg import JointState
    from websockets.asyncio.client import connect

    statuses: list = []
    diagnostics_of(test_node, "/hostile/view", statuses)
    view = start_process([executable("mbs_dynamics_view"), "--ros-args", "-r", "__ns:=/hostile", "-p",
                          f"robot_description_file:={mbs.bundled_robot('arm7')}", "-p", "port:=0",
                          "-p", "diagnostics_period:=0.2"])
    port = int(re.search(r"open http://127\.0\.0\.1:(\d+)/", view.wait_for("open http://", 60)[0]).group(1))
    assert http_get(port, "rebound.example")[0] == 403
    assert [open_websocket(port, origin=f"http://evil{k}.example") for k in range(5)] == [-403] * 5

    async def garbage(count: int) -> None:
        for k in range(count):
            async with connect(f"ws://127.0.0.1:{port}", subprotocols=[PROTOCOL], max_size=None) as websocket:
                await websocket.recv()
                await websocket.send(b"\xc1" * (k + 1) if k % 2 else f"text {k}")
                await websocket.wait_closed()

    started = time.monotonic()
    asyncio.run(garbage(20))
    spin_until(test_node, lambda: statuses and int(statuses[-1][1].get("dropped_browser_message", 0)) == 20, 30,
               "20 malformed messages counted")
    elapsed = time.monotonic() - started
    values = statuses[-1][1]
    assert int(values["dropped_browser_host"]) == 1 and int(values["dropped_browser_origin"]) == 5, values
    frames = int(values["frames"])
    publisher = test_node.create_publisher(JointState, "/hostile/joint_states", 10)
    message = JointState(name=[f"joint{k}" for k in range(1, 8)], position=[0.2] * 7)
    spin_until(test_node, lambda: publisher.publish(message) or int(statuses[-1][1]["frames"]) > frames, 30,
               "a frame drawn after the bad browsers")
    assert open_websocket(port) > 1000
    assert view.interrupt() == 0
    warnings = [line for line in view.lines if "dropped: view:" in line]
    print("\n".join(warnings))
    assert "a request for Host 'rebound.example', not an address of this view" in warnings[0]
    # one line per reason (host, origin, message) per 5 s: the counts are in /diagnostics
    assert len(warnings) <= 3 * (2 + elapsed / 5), warnings
    assert "Traceback" not in view.output


@pytest.mark.parametrize("host, line", [
    ("''", r"\[FATAL\].*view: host '' would serve on every interface: give 0.0.0.0 for that, or 127.0.0.1 "
           r"\(this machine only\); stopping"),
    ("evil.invalid", r"\[FATAL\].*view: host 'evil.invalid' is not an IP address: give one of this machine's "
                     r"addresses \(127.0.0.1: this machine only; 0.0.0.0: every interface\); stopping"),
])
def test_a_host_the_view_cannot_serve_on_is_one_line_and_an_exit(start_process, host, line):
    """(evil.invalid once meant 1000 bind attempts and a wait that Ctrl-C
    could not end.)"""
    view = start_process([executable("mbs_dynamics_view"), "--ros-args", "-p",
                          f"robot_description_file:={mbs.bundled_robot('arm7')}", "-p", f"host:={host}"])
    assert view.wait_exit(60) == 1
    assert re.search(line, view.output), view.output
    assert "Traceback" not in view.output


def test_every_interface_is_said_as_such(start_process):
    view = start_process([executable("mbs_dynamics_view"), "--ros-args", "-p",
                          f"robot_description_file:={mbs.bundled_robot('arm7')}", "-p", "host:=0.0.0.0",
                          "-p", "port:=0"])
    served = view.wait_for("view of 'mbs_arm7'", 60)[0]
    assert re.search(r"serving on every interface \(0\.0\.0\.0\) port (\d+): open http://127\.0\.0\.1:\1/ in a "
                     r"browser here, or this machine's IP address \(or name\) at that port from another", served)
    assert view.interrupt() == 0


def test_a_recording_that_cannot_be_written_says_so_in_one_line(start_process, tmp_path):
    """A directory that does not exist: said at start, before the run, and
    the node stops; a disk that fills (/dev/full): said at the end, in one
    line, and the node stops cleanly."""
    arm = mbs.bundled_robot("arm7")
    missing = start_process([executable("mbs_dynamics_view"), "--ros-args", "-p", f"robot_description_file:={arm}",
                             "-p", "port:=0", "-p", f"record_file:={tmp_path}/no/run.html"])
    assert missing.wait_exit(60) == 1
    assert re.search(rf"\[FATAL\].*view: cannot write recording {tmp_path}/no/run.html: no directory {tmp_path}/no; "
                     "stopping", missing.output), missing.output
    full = tmp_path / "full.html"
    full.symlink_to("/dev/full")
    view = start_process([executable("mbs_dynamics_view"), "--ros-args", "-p", f"robot_description_file:={arm}",
                          "-p", "port:=0", "-p", f"record_file:={full}"])
    view.wait_for("open http://", 60)
    assert view.interrupt() == 0
    assert re.search(rf"\[ERROR\].*view: the recording is lost: cannot write recording {full}: No space left on "
                     "device$", view.output, re.M), view.output
    assert "Traceback" not in view.output


def test_a_view_that_fails_beside_the_simulator_is_switched_off_alone(start_process, test_node):
    """The bringup's view waits for robot_description on its topic (the
    simulator has its file) and then cannot serve on its host: said once,
    the view is off; the simulator publishes on, in the same process, and
    Ctrl-C stops it with 0."""
    from sensor_msgs.msg import JointState

    from ros_processes import publish_robot_description

    states: list = []
    test_node.create_subscription(JointState, "/joint_states", lambda m: states.append(time.monotonic()), 50)
    bringup = start_process([executable("mbs_dynamics_bringup"), "--robot", "arm7", "--nodes", "simulator",
                             "--view", "--ros-args", "-p", "view:robot_description_file:=''",
                             "-p", "view:host:=192.0.2.1"])
    bringup.wait_for("waiting for the robot description on /robot_description", 60)
    spin_until(test_node, lambda: len(states) > 20, 60, "the simulator's joint_states")
    publish_robot_description(test_node, Path(mbs.bundled_robot("arm7")).read_text())
    off = bringup.wait_for("the view is off, the other nodes go on", 60)[0]
    assert "view: cannot serve on host 192.0.2.1 port 8080: Cannot assign requested address" in off
    count = len(states)
    spin_until(test_node, lambda: len(states) > count + 100, 30, "the simulator publishing after the view failed")
    assert bringup.process.poll() is None
    assert bringup.interrupt() == 0
    assert bringup.output.count("the view is off") == 1 and "Traceback" not in bringup.output
