"""View node: the robot in 3-D in a browser, on the pip route too (default
name ``view``; console script ``mbs_dynamics_view``; ``--view`` in the
bringup). It serves the page itself on http://HOST:PORT/ (viser, offline)
and logs the address to open.

    joint_states                            sensor_msgs/JointState: the robot's pose
    odom                                    nav_msgs/Odometry: the floating base's
    simulator/contact_wrenches              contact forces, drawn as red segments
    inverse_dynamics/centroidal_momentum    centre of mass (sphere), linear momentum
                                            (blue) and angular momentum (purple)
    com_reference_topic (none by default)   geometry_msgs/PointStamped: a CoM reference
                                            (a whole_body_controller's), a green sphere
    world                                   visualization_msgs/MarkerArray: the ground grid
                                            and the static boxes, as the simulator has them
    objects                                 visualization_msgs/MarkerArray: the free objects
                                            where they are (each message holds them all)
    /diagnostics                            frames shown, messages replaced, dropped,
                                            browsers (pages) and websocket connections

All names are relative to the node's namespace (the topic parameters too):
one view per robot. The view draws at most `rate` frames a second, each from
the latest messages; a message that a newer one replaces before it is drawn
is counted (`replaced`), never queued, and a browser that is slow or gone
costs nothing (viser sends only the newest pose). A joint_states message may
name some joints only (several publishers); joints never named stay at their
neutral position.

With record_file (.html: a self-contained page; .viser: viser's recording)
every frame drawn is kept, timed by the messages' stamps, and written when
the node stops (Ctrl-C, or the bringup's --duration), to share a run.

Bad input never stops the node: a malformed or non-finite message is dropped
and counted with a throttled warning; visuals that cannot be drawn (a mesh
not found or unreadable) are said once and the link's collision geometry,
if it has some, is drawn instead; without a robot description the node
waits for it and says so.

Browsers are taken for hostile (viewer_server.Admission): the page and its
websocket only under this view's own names (localhost, the address served,
allowed_origins), a refused connection and one closed on a malformed
message dropped and counted (dropped_browser_<reason>) with a throttled
warning. A host it cannot serve on (not an IP address of this machine; ''
is refused, 0.0.0.0 is every interface and said so) and a record_file it
cannot write are one line at start, and the node stops.

Beside other nodes (the bringup) the view is not essential
(spinning.essential): once serving, its failure (its executor thread, a
robot description it cannot take) switches it off alone, said once; the
others serve on, and a recording is still written at the end.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, fields
from pathlib import Path

from geometry_msgs.msg import PointStamped
from nav_msgs.msg import Odometry
from rclpy.experimental import EventsExecutor
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from visualization_msgs.msg import MarkerArray

from mbs_dynamics.files import check_writable
from mbs_dynamics.ros.conversions import InvalidInput, base_state, named_values, stamp_seconds, vector_values
from mbs_dynamics.ros.markers import WORLD_QOS, shapes_of_markers, world_of_markers
from mbs_dynamics.ros.parameters import EMPTY_STRING_ARRAY, ParameterSpec, diagnostics_period
from mbs_dynamics.ros.robot_node import RobotNode, timing_values, timings
from mbs_dynamics.ros.spinning import node_main
from mbs_dynamics.view.viewer import ViewerUnavailable
from mbs_dynamics_interfaces.msg import CentroidalMomentum, ContactWrenches

# Only the newest message matters: no queue behind it.
LATEST_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
RECORDINGS = (".html", ".viser")


def view_executor() -> EventsExecutor:
    """The view's executor: an EventsExecutor of its own (spin_nodes gives
    each kind its thread), so that drawing (0.5-2 ms a frame) never delays
    the inverse dynamics node in the same process."""
    return EventsExecutor()



@dataclass(frozen=True)
class ViewSettings:
    """What the drawing reads (the parameters of the same names)."""

    rate: float
    force_scale: float
    momentum_scale: float
    diagnostics_period: float
    geometry: str


class ViewNode(RobotNode):
    FAILURE_PREFIX = "view: "
    EXECUTOR = staticmethod(view_executor)
    ESSENTIAL = False  # beside other nodes, its failure switches it off alone (spinning.essential)
    switch_off_on_failure = False
    PARAMETERS = (
        ParameterSpec("host", "127.0.0.1",
                      "IP address the page is served on: 127.0.0.1 (this machine only) or 0.0.0.0 (every "
                      "interface: other machines can open it, under an IP address); '' is refused.",
                      read_only=True),
        ParameterSpec("port", 8080, "Port of the page; taken: the next free one (the log says which). 0: any.",
                      read_only=True, bounds=(0, 65535)),
        ParameterSpec("allowed_origins", EMPTY_STRING_ARRAY,
                      "Origins (scheme://host[:port], e.g. http://robot-pc.local:8080) whose pages may show the "
                      "view besides its own: their host may name the page (HTTP Host) and their pages open its "
                      "websocket (Origin). Without: localhost, the address served (0.0.0.0: any IP address "
                      "and this machine's name).", read_only=True),
        ParameterSpec("rate", 30.0, "Frames drawn per second, at most (each from the latest messages).",
                      bounds=(0.1, 240.0)),
        ParameterSpec("geometry", "visual",
                      "What is drawn: 'visual' (the URDF's <visual>, its <collision> where a link has no "
                      "drawable visual) or 'collision'.", read_only=True),
        ParameterSpec("mesh_search_paths", EMPTY_STRING_ARRAY,
                      "Directories where mesh files are looked for (package://PKG/path as DIR/PKG/path or "
                      "DIR/path, relative paths as DIR/path), after the ament index and the Python "
                      "environment.", read_only=True),
        ParameterSpec("contact_wrenches_topic", "simulator/contact_wrenches",
                      "ContactWrenches drawn as forces (relative to the namespace); empty: none.", read_only=True),
        ParameterSpec("centroidal_momentum_topic", "inverse_dynamics/centroidal_momentum",
                      "CentroidalMomentum drawn at the centre of mass (relative to the namespace); empty: none.",
                      read_only=True),
        ParameterSpec("com_reference_topic", "",
                      "geometry_msgs/PointStamped of a centre-of-mass reference (a whole_body_controller's "
                      "~/com_reference, world frame) drawn as a green sphere (relative to the namespace); empty: none.",
                      read_only=True),
        ParameterSpec("force_scale", 0.002, "Length (m) of a contact force's segment per newton.",
                      bounds=(0.0, 10.0)),
        ParameterSpec("momentum_scale", 0.05,
                      "Length (m) of the momentum segments per kg m/s (linear) and kg m^2/s (angular).",
                      bounds=(0.0, 100.0)),
        ParameterSpec("world_topic", "world",
                      "visualization_msgs/MarkerArray of the world's ground and static boxes (relative to the "
                      "namespace; the simulator publishes it, transient-local); empty: none. Until it arrives the "
                      "ground grid is at 0.", read_only=True),
        ParameterSpec("objects_topic", "objects",
                      "visualization_msgs/MarkerArray of the free objects where they are (relative to the "
                      "namespace; the simulator publishes it), each message all of them; empty: none.",
                      read_only=True),
        ParameterSpec("record_file", "",
                      "Keep every frame drawn and write them when the node stops: a self-contained page "
                      "(.html) or a viser recording (.viser). Empty: no recording.", read_only=True),
        diagnostics_period(),
    )

    def on_robot(self, robot) -> None:
        record = self.parameter("record_file")
        if record and Path(record).suffix not in RECORDINGS:
            raise ValueError(f"record_file must end in {' or '.join(RECORDINGS)}, got '{record}'")
        if record:
            check_writable(record, "recording")  # before the run, not at its end
        self.viewer = self._viewer(robot)
        for warning in self.viewer.warnings:
            self.get_logger().warning(f"view: {warning}")
        self.q = self.model.neutral_configuration()
        self._latest = {"joint_states": None, "odom": None, "contacts": None, "momentum": None, "world": None,
                        "objects": None, "com_reference": None}
        self.frame_times = timings()
        if self.parameter("record_file"):
            self.viewer.start_recording()
        self.check_parameters_at_run_time()
        self.create_subscription(JointState, "joint_states", self._keep("joint_states"), LATEST_QOS)
        if self.model.floating_base:
            self.create_subscription(Odometry, "odom", self._keep("odom"), LATEST_QOS)
        if self.parameter("contact_wrenches_topic"):
            self.create_subscription(ContactWrenches, self.parameter("contact_wrenches_topic"),
                                     self._keep("contacts"), LATEST_QOS)
        if self.parameter("centroidal_momentum_topic"):
            self.create_subscription(CentroidalMomentum, self.parameter("centroidal_momentum_topic"),
                                     self._keep("momentum"), LATEST_QOS)
        if self.parameter("com_reference_topic"):
            self.create_subscription(PointStamped, self.parameter("com_reference_topic"),
                                     self._keep("com_reference"), LATEST_QOS)
        if self.parameter("world_topic"):
            self.create_subscription(MarkerArray, self.parameter("world_topic"), self._keep("world"), WORLD_QOS)
        if self.parameter("objects_topic"):
            self.create_subscription(MarkerArray, self.parameter("objects_topic"), self._keep("objects"), LATEST_QOS)
        self._frame_timer = self.create_timer(1.0 / self.settings.rate, self._draw)
        self.report_diagnostics("view")
        if self.viewer.every_interface:
            self.get_logger().info(
                f"view of '{self.model.name}': serving on every interface ({self.parameter('host')}) port "
                f"{self.viewer.server.get_port()}: open {self.viewer.url} in a browser here, or this machine's "
                "IP address (or name) at that port from another")
        else:
            self.get_logger().info(f"view of '{self.model.name}': open {self.viewer.url} in a browser")

    def _viewer(self, robot):
        from mbs_dynamics.view.viewer import Viewer

        return Viewer(self.model, self.robot_xml, self.mesh_search_paths(), host=self.parameter("host"),
                      port=self.parameter("port"), source=self.parameter("geometry"),
                      title=f"{self.get_namespace().rstrip('/')}/{robot.name}",
                      allowed_origins=self.parameter("allowed_origins"),
                      report=lambda reason, text: self.drop(f"browser_{reason}", f"view: {text}"))

    def settings_with(self, changes: dict) -> ViewSettings:
        settings = ViewSettings(**self.parameter_values(changes, (f.name for f in fields(ViewSettings))))
        if settings.geometry not in ("visual", "collision"):
            raise ValueError(f"geometry must be 'visual' or 'collision', got '{settings.geometry}'")
        return settings

    def apply_settings(self, settings: ViewSettings, changed: set) -> None:
        super().apply_settings(settings, changed)
        if "rate" in changed:
            self._frame_timer.timer_period_ns = int(1e9 / settings.rate)

    # --- inputs: the newest of each, nothing queued ---------------------------------

    def _keep(self, kind: str):
        def keep(message) -> None:
            self.counts[f"received_{kind}"] += 1
            if self._latest[kind] is not None:
                self.counts["replaced"] += 1
            self._latest[kind] = message
        return keep

    def _take(self, kind: str):
        message, self._latest[kind] = self._latest[kind], None
        return message

    # --- drawing ---------------------------------------------------------------

    def _draw(self) -> None:
        start = time.perf_counter()
        states, odometry = self._take("joint_states"), self._take("odom")
        contacts, momentum, reference = self._take("contacts"), self._take("momentum"), self._take("com_reference")
        world, objects = self._take("world"), self._take("objects")
        if world is not None:
            self._show_world(world)
        if objects is not None:
            self._show_objects(objects)
        try:
            stamp = self._update_pose(states, odometry)
        except InvalidInput as error:
            self.drop(error.reason, str(error))
            return
        if stamp is None and contacts is None and momentum is None and reference is None:
            return
        viewer = self.viewer
        if stamp is not None:
            viewer.mark_time(stamp)
        try:
            if stamp is not None:
                viewer.show(self.q)
            if contacts is not None:
                self._show_contacts(contacts)
            if momentum is not None:
                self._show_momentum(momentum)
            if reference is not None:
                self._show_com_reference(reference)
        except InvalidInput as error:
            self.drop(error.reason, str(error))
            return
        except ValueError as error:  # the core refused the state: says why
            self.drop("invalid", f"view: {error}")
            return
        except ViewerUnavailable as error:
            self.drop("not_drawn", f"view: {error}")
            return
        self.counts["frames"] += 1
        self.frame_times.append(time.perf_counter() - start)

    def _show_world(self, message: MarkerArray) -> None:
        try:
            self.viewer.show_world(*world_of_markers(message))
        except InvalidInput as error:
            self.drop(error.reason, str(error))
        except ViewerUnavailable as error:
            self.drop("not_drawn", f"view: {error}")

    def _show_objects(self, message: MarkerArray) -> None:
        warnings = len(self.viewer.warnings)
        try:
            self.viewer.show_objects(shapes_of_markers(message))
        except InvalidInput as error:
            self.drop(error.reason, str(error))
        except ViewerUnavailable as error:
            self.drop("not_drawn", f"view: {error}")
        for warning in self.viewer.warnings[warnings:]:
            self.get_logger().warning(f"view: {warning}")

    def _update_pose(self, states: JointState | None, odometry: Odometry | None) -> float | None:
        """Take the newest joint_states and odom into self.q; the stamp of the
        pose to draw, None when nothing new (InvalidInput on a bad message)."""
        stamp = None
        if odometry is not None:
            q_base, _ = base_state(odometry.pose.pose, odometry.twist.twist)
            self.q[:7] = q_base
            stamp = stamp_seconds(odometry.header.stamp)
        if states is not None:
            match = self.joints.match(states.name)
            positions = named_values(match, states.position, "joint_states position")
            if positions is None:
                raise InvalidInput("invalid", "joint_states has no positions")
            self.q[match.q_index] = positions
            stamp = stamp_seconds(states.header.stamp)
        if stamp is not None and self.model.floating_base and self.counts["received_odom"] == 0:
            return None  # the base's pose is unknown: nothing to draw yet
        return stamp

    def _show_contacts(self, message: ContactWrenches) -> None:
        frames = [w.frame for w in message.wrenches]
        unknown = sorted({frame for frame in frames if frame not in self.model.frames})
        if unknown:
            raise InvalidInput("unknown_frame", f"contact wrenches at frames the model does not have: {unknown[:5]}")
        points = [vector_values(w.point) for w in message.wrenches]
        forces = [vector_values(w.wrench.force) for w in message.wrenches]
        self.viewer.show_contacts(frames, points, forces, self.settings.force_scale)

    def _show_momentum(self, message: CentroidalMomentum) -> None:
        self.viewer.show_momentum(vector_values(message.com_position), vector_values(message.linear_momentum),
                                  vector_values(message.angular_momentum), self.settings.momentum_scale)

    def _show_com_reference(self, message: PointStamped) -> None:
        point = vector_values(message.point)
        if not all(map(math.isfinite, point)):
            raise InvalidInput("invalid", f"{self.parameter('com_reference_topic')}: the point {point} is not "
                                             "finite")
        self.viewer.show_com_reference(point)

    # --- recording, stopping ---------------------------------------------------

    def _write_recording(self) -> str:
        path = self.viewer.save(self.parameter("record_file"))
        how = "open it in a browser" if path.suffix == ".html" else "viser's client plays it (index.html?playbackPath=)"
        return (f"wrote {path.resolve()} ({path.stat().st_size / 1e6:.1f} MB, {self.counts['frames']} frames): {how} "
                "to replay the run")

    def stopping(self) -> None:
        viewer = getattr(self, "viewer", None)
        if viewer is None:
            return
        if self.parameter("record_file"):
            try:
                self.get_logger().info(f"view: {self._write_recording()}")
            except (OSError, ValueError) as error:  # files.FileProblem: says which file and why
                self.get_logger().error(f"view: the recording is lost: {error}")
        viewer.close()

    def fail(self, message: str) -> None:
        if self.switch_off_on_failure:
            self.switch_off(message)
        else:
            super().fail(message)

    def switch_off(self, reason: str) -> None:
        """Stop drawing and serving, said once; the other nodes of the
        process go on (spinning.essential). A recording is still written at
        the end."""
        if self.fatal_error is not None:
            return
        self.fatal_error = reason
        self.get_logger().error(f"{reason}; the view is off, the other nodes go on")
        timer = getattr(self, "_frame_timer", None)
        if timer is not None:
            timer.cancel()
        viewer = getattr(self, "viewer", None)
        if viewer is not None:
            viewer.close()

    def diagnostics(self) -> tuple[str, dict, bool]:
        dropped = self.dropped()
        values = {"url": self.viewer.url, "frames": self.counts["frames"], "replaced": self.counts["replaced"],
                  "dropped": dropped, "browsers": len(self.viewer.server.get_clients()),
                  "connections": self.viewer.connections()}
        values.update({key: count for key, count in sorted(list(self.counts.items())) if key not in values})
        values.update(timing_values("frame", self.frame_times))
        if self.fatal_error is not None:
            return f"off: {self.fatal_error}", values, True
        return (f"{values['browsers']} browsers, {self.counts['frames']} frames drawn, {dropped} dropped", values,
                dropped > 0)


main = node_main(ViewNode, "view")

if __name__ == "__main__":
    main()
