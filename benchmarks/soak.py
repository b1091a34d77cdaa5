#!/usr/bin/env python3
"""Soak: the bringup's closed loop on TALOS (example-robot-data, fixed base:
the inverse dynamics node holds it up, the simulator applies its efforts)
with the view and a headless Chromium attached, for a long time.

    .venv/bin/python benchmarks/soak.py [--minutes 30] [--summary-period 10]
        [--robot-description-file URDF] [--no-browser]

Measured, independently of the nodes' own counts:
* lost: every joint_states the simulator publishes must come back as
  efforts with its stamp; this script subscribes to both (deep reliable
  queues) and counts the states without an answer (and the gaps in the
  states it saw itself, to tell its own losses from the loop's);
* resident memory of the bringup's process (/proc VmRSS) every 10 s, against
  its value once warm (after the first 2 minutes or a tenth of the run);
* the run monitor's real-time factor at every summary (over each period);
* the nodes' diagnostics at the end (dropped, stale commands, the view's
  frames and browsers).
Goals (issue 28): 0 lost, memory flat within 5 %, real-time factor 1.00 at
every summary. Exits 1 when a goal is missed.
"""
import argparse
import contextlib
import importlib.metadata
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ros_domain import use_private_ros_domain  # benchmarks/ros_domain.py

TALOS = str(importlib.metadata.distribution("example-robot-data").locate_file(
    "cmeel.prefix/share/example-robot-data/robots/talos_data/robots/talos_reduced.urdf"))
BIN = Path(sys.executable).parent


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Loop:
    """What this script hears of the closed loop: joint_states and efforts by
    stamp, and the nodes' last diagnostics."""

    def __init__(self):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.experimental import EventsExecutor
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        rclpy.init()
        self.node = rclpy.create_node("soak_listener")
        queue = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.states, self.efforts, self.diagnostics = set(), set(), {}
        self.node.create_subscription(JointState, "/joint_states", lambda m: self.states.add(stamp(m)), queue)
        self.node.create_subscription(JointState, "/inverse_dynamics/joint_efforts",
                                      lambda m: self.efforts.add(stamp(m)), queue)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 100)
        self.executor = EventsExecutor()
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self._stop = False
        self.thread.start()

    def _spin(self):
        while not self._stop:
            self.executor.spin_once(timeout_sec=0.2)

    def _on_diagnostics(self, message):
        for status in message.status:
            self.diagnostics[status.name.split(":")[0]] = {kv.key: kv.value for kv in status.values}

    def close(self):
        import rclpy

        self._stop = True
        self.thread.join(5)
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown()


def stamp(message) -> int:
    return message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--summary-period", type=float, default=10.0)
    parser.add_argument("--robot-description-file", default=TALOS)
    parser.add_argument("--no-browser", action="store_true")
    arguments = parser.parse_args()
    use_private_ros_domain()
    seconds = arguments.minutes * 60
    chromium = shutil.which("chromium")
    if not arguments.no_browser and chromium is None:
        return print("no chromium: apt-get install chromium, or --no-browser", file=sys.stderr) or 2

    loop = Loop()
    bringup = subprocess.Popen(
        [str(BIN / "mbs_dynamics_bringup"), "--robot-description-file", arguments.robot_description_file,
         "--closed-loop", "--duration", f"{seconds:g}", "--summary-period", f"{arguments.summary_period:g}",
         "--view", "--ros-args", "-p", "view:port:=0", "-p", "diagnostics_period:=2.0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines, url_seen = [], threading.Event()

    def read():
        for line in bringup.stdout:
            lines.append(line.rstrip("\n"))
            if "open http://" in line:
                url_seen.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not url_seen.wait(120):
        bringup.kill()
        print("\n".join(lines), file=sys.stderr)
        return 1
    url = re.search(r"open (http://\S+) in a browser", next(l for l in lines if "open http://" in l)).group(1)
    profile = tempfile.mkdtemp()
    browser = None
    if not arguments.no_browser:
        browser = subprocess.Popen([chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                                    "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--window-size=480,360",
                                    "--no-first-run", "--disable-background-networking", "--disable-sync",
                                    f"--user-data-dir={profile}", "--remote-debugging-port=0", url],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    started = time.monotonic()
    warm_after = min(120.0, seconds / 10)
    rss, printed = [], 0
    try:
        while bringup.poll() is None:
            time.sleep(10.0)
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                resident = resident_mb(bringup.pid)
                if resident == resident:  # not NaN: a process that has just ended has none
                    rss.append((time.monotonic() - started, resident))
            factors = re.findall(r"\[run_monitor\]: t = ([\d.]+) s, real-time factor ([\d.]+)", "\n".join(lines))
            if len(factors) > printed:
                t, factor = factors[-1]
                view = loop.diagnostics.get("/view", {})
                print(f"t = {float(t):7.1f} s  real-time factor {factor}  RSS {rss[-1][1] if rss else 0:.0f} MB  states "
                      f"{len(loop.states)} efforts {len(loop.efforts)}  view frames {view.get('frames', '?')} "
                      f"browsers {view.get('browsers', '?')}", flush=True)
                printed = len(factors)
    except KeyboardInterrupt:
        bringup.send_signal(signal.SIGINT)
    finally:
        if browser is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(browser.pid, signal.SIGKILL)
            browser.wait(10)
        shutil.rmtree(profile, ignore_errors=True)
    code = bringup.wait(60)
    time.sleep(2.0)  # the last efforts in flight
    loop.close()

    output = "\n".join(lines)
    factors = [float(f) for _, f in re.findall(r"\[run_monitor\]: t = ([\d.]+) s, real-time factor ([\d.]+)", output)]
    states, efforts = sorted(loop.states), loop.efforts
    # the states of the loop's last 0.1 s (simulated) may be published as it stops, without their answers
    unanswered = [s for s in states if s not in efforts and s < states[-1] - 100_000_000]
    steps = [b - a for a, b in zip(states, states[1:])]
    period = min(steps) if steps else 0
    own_gaps = sum(round(step / period) - 1 for step in steps) if period else 0
    baseline = [mb for at, mb in rss if at >= warm_after][:1] or [rss[0][1]]
    late = [mb for at, mb in rss if at >= warm_after]
    drift = max(abs(mb / baseline[0] - 1) for mb in late) if late else float("nan")
    print(f"\nexit code {code}; {len(states)} joint_states seen, {len(unanswered)} without efforts (lost in the "
          f"loop), {own_gaps} missing from what this script saw")
    if unanswered:
        print("  without efforts, simulated time (s): " + ", ".join(f"{s * 1e-9:.3f}" for s in unanswered[:10]))
    slow = [(float(t), float(f)) for t, f in re.findall(r"\[run_monitor\]: t = ([\d.]+) s, real-time factor "
                                                        r"([\d.]+)", output) if float(f) < 0.995]
    if slow:
        print("  summaries below 0.995 (simulated time s, factor): " + ", ".join(f"{t:.1f} {f:.2f}" for t, f in slow))
    print(f"resident memory: {rss[0][1]:.0f} MB at {rss[0][0]:.0f} s, {baseline[0]:.0f} MB once warm "
          f"({warm_after:.0f} s), {late[-1] if late else float('nan'):.0f} MB at the end; largest deviation from "
          f"warm {100 * drift:.1f} %")
    print(f"real-time factor per summary: min {min(factors):.2f}, max {max(factors):.2f} over {len(factors)} "
          f"summaries" if factors else "no summaries")
    for name, values in sorted(loop.diagnostics.items()):
        keys = ("received", "published", "dropped", "commands", "stale_command", "frames", "replaced", "browsers",
                "real_time_factor", "unconverged_steps")
        print(f"  {name}: " + ", ".join(f"{k} {values[k]}" for k in keys if k in values))
    ok = code == 0 and not unanswered and drift <= 0.05 and factors and min(factors) >= 0.995
    print("all goals met" if ok else "a goal was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
