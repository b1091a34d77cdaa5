"""mbs_dynamics_play_trajectory: a joint trajectory file played as
trajectory_msgs/JointTrajectory messages, e.g. an excitation trajectory for
the inverse dynamics node's ~/reference.

    mbs_dynamics_play_trajectory FILE [--topic reference] [--rate-scale R] [--loop]
                                 [--start-delay S] [--whole] [--wait-for-subscribers N]
                                 [--use-sim-time] [--ros-args ...]

FILE is a CSV file in mbs_dynamics.identification.csv_data's format (time, then
position/<joint>, velocity/<joint>, acceleration/<joint> columns; positions
needed, the others optional). The topic is relative to the node's namespace
(``--ros-args -r reference:=/ns/inverse_dynamics/reference`` or ``--topic``
reaches another).

Sample by sample (the default): one message per sample, published when the ROS
clock reaches the sample's time (simulated time with --use-sim-time: the
simulator's /clock), with one point: the sample's positions, velocities and
accelerations, time_from_start 0, and the time it is meant for as its header
stamp. The first sample goes out --start-delay seconds after --wait-for-
subscribers subscribers (default 1) are there; --rate-scale R plays R times
faster (velocities times R, accelerations times R², so that the messages stay
a consistent trajectory); --loop plays it again and again, each pass one
sample interval after the last ended, until Ctrl-C. At the end the last
position is held: published HOLD_COUNT more times, HOLD_PERIOD apart, with
zero velocities and accelerations; then the player exits 0.

With --whole, the whole trajectory goes out as one message of many points
(time_from_start from the first sample, header stamp the time to start), as a
joint_trajectory_controller takes it.

What cannot be played is refused in one line on stderr: a malformed command
line or an option out of its bounds (--rate-scale within MIN_RATE_SCALE and
MAX_RATE_SCALE, --start-delay up to MAX_START_DELAY, a topic name rcl
refuses) with exit code 2, as argparse; with exit code 1 a FILE that is not
a regular file of at most csv_data.MAX_CSV_BYTES (a FIFO, /dev/zero), is
malformed, or whose samples the rate scale would put on the same nanosecond
or beyond MAX_DURATION, and --ros-args that rcl refuses.
"""
from __future__ import annotations

import argparse
import sys
import threading

import numpy as np
from rclpy._rclpy_pybind11 import RCLError
from rclpy.duration import Duration
from rclpy.exceptions import InvalidTopicNameException
from rclpy.expand_topic_name import expand_topic_name
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from rclpy.validate_full_topic_name import validate_full_topic_name
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from mbs_dynamics.command_line import EXIT_BAD_DATA, OneLineErrorParser, number, say_error
from mbs_dynamics.identification.csv_data import read_csv
from mbs_dynamics.identification.recording import Recording
from mbs_dynamics.ros.robot_node import ProcessNode
from mbs_dynamics.ros.spinning import STOP_TIMEOUT, spin_nodes, split_ros_args

PROG = "mbs_dynamics_play_trajectory"
NODE_NAME = "trajectory_player"

# Reliable, so that no sample is lost; deep enough for a burst of samples released together by a coarse /clock.
TRAJECTORY_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                            durability=DurabilityPolicy.VOLATILE)
HOLD_COUNT = 5
HOLD_PERIOD = 0.05  # s, ROS time
# Longest wall-clock wait (s) between looks at a simulated clock, whose rate is not known.
SIM_TIME_POLL = 0.001
# A sample published this much (s) after its time counts as late.
LATE = 0.001
# --rate-scale's bounds: a thousand times slower or faster than recorded.
MIN_RATE_SCALE, MAX_RATE_SCALE = 1e-3, 1e3
# The longest --start-delay and the longest trajectory as played (s): a day, some 30 years.
MAX_START_DELAY = 86400.0
MAX_DURATION = 1e9


class Trajectory:
    """What is played of a recording: joint names, sample times (ns from the
    first sample) and the point of each sample at the rate scale."""

    def __init__(self, recording: Recording, rate_scale: float):
        """ValueError for a recording without positions, or that cannot be
        played at rate_scale: longer than MAX_DURATION, samples on the same
        nanosecond, values that overflow."""
        if recording.position is None:
            raise ValueError(f"{recording.source}: no position columns: a trajectory needs positions")
        self.joint_names = list(recording.joint_names)
        duration = recording.duration / rate_scale
        if not duration <= MAX_DURATION:
            raise ValueError(f"{recording.source}: {recording.duration:.6g} s at rate scale {rate_scale:g} play "
                             f"{duration:.3g} s, longer than the {MAX_DURATION:.0e} s a trajectory may last")
        self.times_ns = np.round((recording.time - recording.time[0]) / rate_scale * 1e9).astype(np.int64)
        if np.any(np.diff(self.times_ns) <= 0):
            k = int(np.argmax(np.diff(self.times_ns) <= 0))
            raise ValueError(f"{recording.source}: at rate scale {rate_scale:g}, samples {k} and {k + 1} (t = "
                             f"{recording.time[k]:.9g} and {recording.time[k + 1]:.9g} s) fall on the same nanosecond")
        self.positions = recording.position
        self.velocities = None if recording.velocity is None else recording.velocity * rate_scale
        self.accelerations = None if recording.acceleration is None else recording.acceleration * rate_scale ** 2
        for name, values in (("velocities", self.velocities), ("accelerations", self.accelerations)):
            if values is not None and not np.all(np.isfinite(values)):
                raise ValueError(f"{recording.source}: the {name} overflow at rate scale {rate_scale:g}")
        # a loop's next pass starts one (last) sample interval after this one's last sample
        self.period_ns = int(self.times_ns[-1] + (self.times_ns[-1] - self.times_ns[-2] if len(self) > 1 else 0))

    def __len__(self) -> int:
        return self.times_ns.size

    def point(self, k: int, time_from_start_ns: int = 0) -> JointTrajectoryPoint:
        point = JointTrajectoryPoint(positions=self.positions[k].tolist(),
                                     time_from_start=Duration(nanoseconds=time_from_start_ns).to_msg())
        if self.velocities is not None:
            point.velocities = self.velocities[k].tolist()
        if self.accelerations is not None:
            point.accelerations = self.accelerations[k].tolist()
        return point

    def held(self) -> JointTrajectoryPoint:
        """The last position, held still."""
        point = self.point(len(self) - 1)
        point.velocities = [0.0] * len(self.joint_names) if self.velocities is not None else []
        point.accelerations = [0.0] * len(self.joint_names) if self.accelerations is not None else []
        return point


class TrajectoryPlayer(ProcessNode):
    """Publishes a Trajectory on `topic` from a thread of its own, timed on
    the node's clock, and ends its process when done."""

    def __init__(self, node_name: str, trajectory: Trajectory, topic: str = "reference", start_delay: float = 0.0,
                 loop: bool = False, whole: bool = False, subscribers: int = 1, **kwargs):
        super().__init__(node_name, **kwargs)
        self.trajectory, self.loop, self.whole = trajectory, loop, whole
        self.start_delay_ns = round(start_delay * 1e9)
        self.subscribers = subscribers
        self.published = 0
        self.late = 0  # samples published more than LATE after their time
        self.publisher = self.create_publisher(JointTrajectory, topic, TRAJECTORY_QOS)
        self._poll = SIM_TIME_POLL if self.get_parameter("use_sim_time").value else None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._play, name="trajectory player", daemon=True)
        self._thread.start()

    def stopping(self) -> None:
        self._stopped.set()
        self._thread.join(STOP_TIMEOUT)

    def _play(self) -> None:
        try:
            if not (self._wait_for_subscribers() and self._wait_for_clock()):
                return
            trajectory = self.trajectory
            self.get_logger().info(
                f"playing {len(trajectory)} samples of {len(trajectory.joint_names)} joints over "
                f"{trajectory.times_ns[-1] * 1e-9:g} s{' as one message' if self.whole else ''}"
                f"{', looped' if self.loop else ''} on {self.publisher.topic_name}")
            start = self.get_clock().now().nanoseconds + self.start_delay_ns
            if self.whole:
                self._publish_whole(start)
            elif self._publish_samples(start):
                self._hold()
            if not self._stopped.is_set():  # (acknowledged at DDS's heartbeat: within a few seconds)
                self.publisher.wait_for_all_acked(Duration(seconds=STOP_TIMEOUT))
                self.finish()
        except Exception as error:  # noqa: BLE001  said, and the process ends with 1
            if not self._stopped.is_set():
                self.fail(f"playing the trajectory: {type(error).__name__}: {error}")

    def _wait_for_subscribers(self) -> bool:
        if self.publisher.get_subscription_count() < self.subscribers:
            self.get_logger().info(f"waiting for {self.subscribers} subscriber(s) on {self.publisher.topic_name}")
        while self.publisher.get_subscription_count() < self.subscribers:
            if self._stopped.wait(0.05):
                return False
        return True

    def _wait_for_clock(self) -> bool:
        """The ROS clock runs (simulated time: a /clock message came)."""
        if self.get_clock().now().nanoseconds == 0:
            self.get_logger().info("waiting for /clock (use_sim_time is set)")
        while self.get_clock().now().nanoseconds == 0:
            if self._stopped.wait(0.05):
                return False
        return True

    def _wait_until(self, target_ns: int) -> bool:
        """Wait for the ROS clock to reach `target_ns`; False if stopped first."""
        while (remaining := (target_ns - self.get_clock().now().nanoseconds) * 1e-9) > 0:
            if self._stopped.wait(remaining if self._poll is None else min(remaining, self._poll)):
                return False
        return True

    def _publish_samples(self, start: int) -> bool:
        """Publish every sample (every pass with loop); False if stopped first."""
        trajectory = self.trajectory
        message = JointTrajectory(joint_names=trajectory.joint_names)
        passes = 0
        while True:
            for k, offset in enumerate(trajectory.times_ns):
                target = start + passes * trajectory.period_ns + int(offset)
                if not self._wait_until(target):
                    return False
                if self.get_clock().now().nanoseconds - target > LATE * 1e9:
                    self.late += 1
                message.header.stamp = Time(nanoseconds=target).to_msg()
                message.points = [trajectory.point(k)]
                self.publisher.publish(message)
                self.published += 1
            passes += 1
            if not self.loop:
                break
        coarse = " (simulated time advances as /clock ticks)" if self._poll is not None else ""
        self.get_logger().info(f"played {self.published} samples, {self.late} of them more than {LATE * 1e3:g} ms "
                               f"after their time{coarse}; holding the last position")
        return True

    def _hold(self) -> None:
        message = JointTrajectory(joint_names=self.trajectory.joint_names, points=[self.trajectory.held()])
        for _ in range(HOLD_COUNT):
            if not self._wait_until(self.get_clock().now().nanoseconds + int(HOLD_PERIOD * 1e9)):
                return
            message.header.stamp = self.get_clock().now().to_msg()
            self.publisher.publish(message)

    def _publish_whole(self, start: int) -> None:
        trajectory = self.trajectory
        message = JointTrajectory(joint_names=trajectory.joint_names,
                                  points=[trajectory.point(k, int(offset))
                                          for k, offset in enumerate(trajectory.times_ns)])
        message.header.stamp = Time(nanoseconds=start).to_msg()
        self.publisher.publish(message)
        self.published = 1
        self.get_logger().info(f"published, to start at t = {start * 1e-9:.3f} s")


def topic_name(text: str) -> str:
    """--topic: a topic name rcl takes (relative, ~/..., or absolute)."""
    try:
        validate_full_topic_name(expand_topic_name(text, NODE_NAME, "/"))
    except (InvalidTopicNameException, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error).split(", at /")[0]) from None
    return text


def parse_arguments(argv: list[str]) -> tuple[argparse.Namespace, Trajectory]:
    """The command line (argparse's exit 2 for what is wrong with it) and the
    trajectory of its file (ValueError for what is wrong with that)."""
    parser = OneLineErrorParser(prog=PROG,
                                description="Play a joint trajectory file as trajectory_msgs/JointTrajectory.")
    parser.add_argument("file", metavar="FILE", help="CSV: time, position/<joint>..., velocity/<joint>..., "
                                                     "acceleration/<joint>...")
    parser.add_argument("--topic", type=topic_name, default="reference",
                        help="topic, relative to the namespace (default: reference)")
    parser.add_argument("--rate-scale", type=number(MIN_RATE_SCALE, MAX_RATE_SCALE), default=1.0, metavar="R",
                        help="play R times faster (velocities x R, accelerations x R^2; default 1; "
                             f"{MIN_RATE_SCALE:g} to {MAX_RATE_SCALE:g})")
    parser.add_argument("--loop", action="store_true", help="play again and again until Ctrl-C")
    parser.add_argument("--start-delay", type=number(0.0, MAX_START_DELAY), default=0.0, metavar="S",
                        help="seconds (ROS time) from the subscribers' arrival to the first sample "
                             f"(up to {MAX_START_DELAY:g})")
    parser.add_argument("--whole", action="store_true",
                        help="publish the whole trajectory as one multi-point message (joint_trajectory_controller)")
    parser.add_argument("--wait-for-subscribers", type=number(0, integer=True), default=1, metavar="N",
                        help="start once N subscribers are there (default 1; 0: at once)")
    parser.add_argument("--use-sim-time", action="store_true", help="time the samples on /clock")
    arguments = parser.parse_args(argv)
    if arguments.loop and arguments.whole:
        parser.error("--loop plays sample by sample: not with --whole")
    return arguments, Trajectory(read_csv(arguments.file), arguments.rate_scale)


def main(argv: list[str] | None = None) -> None:
    argv, ros_args = split_ros_args(sys.argv[1:] if argv is None else argv)
    try:
        arguments, trajectory = parse_arguments(argv)
    except (ValueError, MemoryError) as error:  # DataError, FileProblem: the file
        say_error(PROG, error)
        sys.exit(EXIT_BAD_DATA)
    overrides = [Parameter("use_sim_time", value=True)] if arguments.use_sim_time else []
    try:
        code = spin_nodes([lambda stop: TrajectoryPlayer(
            NODE_NAME, trajectory, arguments.topic, arguments.start_delay, arguments.loop, arguments.whole,
            arguments.wait_for_subscribers, stop=stop, parameter_overrides=overrides)], args=[PROG, *ros_args])
    except (RCLError, InvalidTopicNameException, ValueError) as error:  # --ros-args rcl refuses, a remapped topic
        say_error(PROG, str(error).split(", at /")[0])
        code = EXIT_BAD_DATA
    sys.exit(code)


if __name__ == "__main__":
    main()
