"""A 3-D view of a robot in the browser, served from this process on
localhost by viser (its client is bundled in the package: the page works
offline), without ROS:

    viewer = Viewer(model, urdf_xml)          # serving on viewer.url
    viewer.show(q)                            # the robot at q
    viewer.show_contacts(frames, points, forces)
    viewer.show_momentum(com, linear, angular)
    viewer.show_objects(shapes)               # free objects where they are
    viewer.save("run.html")                   # everything shown so far

The scene: the ground grid (z up) and the world's boxes, one scene frame per
body (hidden until the first pose) posed by forward kinematics
(kinematics.body_poses), the body's visuals in it
(visuals.link_visuals: meshes through trimesh, primitives drawn), contact
forces as arrows from their points (FORCE_SCALE m per N), the centre of mass
as a sphere with its linear momentum (MOMENTUM_SCALE m per kg m/s) and
angular momentum about it (m per kg m^2/s) as arrows, free objects as
shapes (show_objects: those not shown again removed).

Updates are the latest state only: viser sends a scene node's newest pose
and drops the unsent ones, so a slow or disconnected browser never makes
work queue up. A recording (start_recording, then save once) keeps every
update with the time between them, to replay as a self-contained HTML page
or a .viser file (viser's player).

Browsers are served by viewer_server.py (Admission: each connection taken
for hostile).

Threads: the scene is changed only on viser's event loop (viser's message
buffer sets an asyncio.Event, which is not thread-safe: changed from another
thread while 20-100 browsers were connected, it raised "deque mutated during
iteration"). The scene is built before a websocket is admitted; from then on
every change is run on the loop (the caller waits, at most LOOP_TIMEOUT). The
recording's serializer takes viser's record lock: used from any thread.
"""
from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mbs_dynamics.algorithms.kinematics import body_poses
from mbs_dynamics.files import write_file
from mbs_dynamics.multibody.model import Model
from mbs_dynamics.spatial.lie import matrix_to_quaternion
from mbs_dynamics.view.server import Admission, ConnectionLog, listening_socket, quiet_browser_warnings, start_viser
from mbs_dynamics.view.visuals import DEFAULT_RGBA, Visual, link_visuals

FORCE_SCALE = 0.002
MOMENTUM_SCALE = 0.05
FORCE_COLOR = (230, 40, 40)
LINEAR_MOMENTUM_COLOR = (40, 120, 230)
ANGULAR_MOMENTUM_COLOR = (150, 60, 200)
COM_COLOR = (250, 200, 0)
COM_REFERENCE_COLOR = (40, 200, 60)
BOX_COLOR = (150, 160, 175)
ARROW_HEAD = 0.05

# The longest a scene change waits for viser's event loop (s).
LOOP_TIMEOUT = 10.0


def _wxyz(R: np.ndarray) -> np.ndarray:
    x, y, z, w = matrix_to_quaternion(R)
    return np.array([w, x, y, z])


def arrows(starts: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Line segments (3n, 2, 3) drawing n arrows from `starts` along
    `vectors` (n, 3): the n shafts, then two barbs at each tip (a head a
    quarter of the arrow long, at most ARROW_HEAD m; none on a zero vector)."""
    tips = starts + vectors
    length = np.linalg.norm(vectors, axis=1, keepdims=True)
    direction = np.divide(vectors, length, out=np.zeros_like(vectors), where=length > 0)
    side = np.cross(direction, (0.0, 0.0, 1.0))
    flat = np.linalg.norm(side, axis=1, keepdims=True) < 1e-6  # vertical: the barbs spread along x
    side = np.where(flat, np.cross(direction, (1.0, 0.0, 0.0)), side)
    side /= np.maximum(np.linalg.norm(side, axis=1, keepdims=True), 1e-12)
    head = np.minimum(0.25 * length, ARROW_HEAD)
    back = tips - head * direction
    return np.concatenate([np.stack([starts, tips], axis=1), np.stack([tips, back + 0.4 * head * side], axis=1),
                           np.stack([tips, back - 0.4 * head * side], axis=1)])


def _rgb(rgba) -> tuple[int, int, int]:
    return tuple(int(round(255 * c)) for c in rgba[:3])


class ViewerUnavailable(RuntimeError):
    """The view's server has stopped, or its event loop did not take a change
    within LOOP_TIMEOUT."""


class Viewer:
    """The view of one robot (module docstring). Visuals that cannot be
    drawn (a mesh file trimesh cannot read) are left out and listed in
    `warnings`, with those of visuals.link_visuals."""

    def __init__(self, model: Model, urdf_xml: str, search_paths=(), host: str = "127.0.0.1", port: int = 8080,
                 source: str = "visual", title: str = "", ground_height: float = 0.0, boxes=(),
                 allowed_origins: Sequence[str] = (), report: Callable[[str, str], None] | None = None):
        """boxes: the world's static stepping.Box (a step, a table),
        drawn; the ground grid at ground_height (show_world changes both). host: an IP address of this
        machine (0.0.0.0 or ::, every interface) or localhost; port: taken,
        the next free one (0: any); ValueError when it cannot serve there.
        allowed_origins: origins (http://robot-pc.local:8080) besides its own
        whose pages may show the view (Admission). report(reason, text): told
        of each connection refused or closed (on viser's event loop), as
        counted in `refused`."""
        from viser import _messages as viser_messages

        quiet_browser_warnings()
        self.model = model
        self.refused: Counter = Counter()
        self.report = report
        self.admission = Admission(host, allowed_origins, self._refuse)
        visuals, warnings = link_visuals(model, urdf_xml, search_paths, source)
        self.warnings = list(warnings)
        log = logging.Logger(f"mbs_dynamics.view.viewer.{id(self)}")  # not the root's: no traceback on stderr
        log.addHandler(ConnectionLog(self._refuse))
        sock = listening_socket(host, port)
        try:
            self.server, self._websockets = start_viser(sock, self.admission, log, host, title or model.name)
        except BaseException:
            sock.close()
            raise
        self._closed, self._loop_thread = False, None
        self._waiting: set[concurrent.futures.Future] = set()  # changes on the loop waited for
        self._loop = self.server.get_event_loop()
        self._loop.set_exception_handler(self._loop_error)
        for request in (viser_messages.ShareUrlRequest, viser_messages.ShareUrlDisconnect):
            self.server._websock_server.unregister_handler(request)  # a browser must not open a public tunnel
        try:
            self._draw_scene(visuals, ground_height, boxes)
            # from here on the scene changes on viser's event loop only, and websockets are taken
            self._loop_thread = self._on_loop(threading.get_ident)
        except BaseException:
            self.close()  # nothing half-built is served
            raise
        self.admission.ready = True

    def _draw_scene(self, visuals: list[Visual], ground_height: float, boxes) -> None:
        """The scene, before any websocket is taken (module docstring)."""
        model = self.model
        # no share button: sharing goes through viser's relay on the internet; the page stays on this machine
        self.server.gui.configure_theme(control_width="small", show_share_button=False)
        self.scene = self.server.scene
        self.scene.set_up_direction("+z")
        self.ground = self.scene.add_grid("/ground", width=10.0, height=10.0, cell_size=0.25, section_size=1.0)
        self.boxes = []
        self._draw_world(ground_height, boxes)
        root = f"/{model.name}"
        # hidden until the first pose: a robot with every body at the origin would be a heap
        self.robot = self.scene.add_frame(root, show_axes=False, visible=False)
        self.body_frames = [self.scene.add_frame(f"{root}/{name or 'body' + str(i)}", show_axes=False)
                            for i, name in enumerate(model.body_joint_names)]
        meshes: dict = {}
        self.drawn = []  # (Visual, its scene handle), of those drawn
        for k, visual in enumerate(visuals):
            parent = self.body_frames[visual.body].name if visual.body >= 0 else f"{root}/world"
            try:
                self.drawn.append((visual, self._add_visual(f"{parent}/v{k}", visual, meshes)))
            except Exception as error:  # noqa: BLE001  trimesh raises many kinds for a bad file
                self.warnings.append(f"{visual.name}: {visual.path} cannot be drawn "
                                     f"({type(error).__name__}: {error}); not drawn")
        self.contact_lines = None
        self.objects: dict[str, tuple] = {}  # key -> (what it draws, its scene frame)
        self._object_meshes: dict = {}
        self.com = self.scene.add_icosphere("/com", radius=0.03, color=COM_COLOR, visible=False)
        self.com_reference = self.scene.add_icosphere("/com_reference", radius=0.03, color=COM_REFERENCE_COLOR,
                                                      visible=False)
        self.momentum = self.scene.add_line_segments(  # arrows(): shafts, then barbs, linear before angular
            "/com/momentum", np.zeros((6, 2, 3)),
            np.array([[LINEAR_MOMENTUM_COLOR] * 2, [ANGULAR_MOMENTUM_COLOR] * 2] * 3, dtype=np.uint8),
            thickness=0.012, visible=False)
        self.recording = None
        self._last_time: float | None = None
        self._world_R, self._world_p = None, None
        self.frame_robot(model.neutral_configuration())

    @property
    def url(self) -> str:
        """The page's address on this machine."""
        host = self.server.get_host()
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "localhost": "127.0.0.1"}.get(host, host)
        return f"http://{f'[{host}]' if ':' in host else host}:{self.server.get_port()}/"

    @property
    def every_interface(self) -> bool:
        """Whether it serves on every interface (host 0.0.0.0 or ::)."""
        return self.admission.every_interface

    def connections(self) -> int:
        """The websocket connections open now (browsers' pages and others)."""
        from websockets.protocol import State

        return sum(connection.state is State.OPEN for connection in list(self._websockets.handlers))

    def _refuse(self, reason: str, text: str) -> None:
        self.refused[reason] += 1
        if self.report is not None:
            self.report(reason, text)

    def _loop_error(self, loop, context: dict) -> None:
        """An error in a task of viser's event loop (a browser's message
        handled): counted, said in one line, no traceback."""
        error = context.get("exception")
        self._refuse("message", f"a browser's message failed: {context.get('message', '')}"
                                + (f" ({type(error).__name__}: {str(error)[:200]})" if error is not None else ""))

    def _call(self, function: Callable, *args):
        """function(*args) where the scene may be changed (module docstring):
        here while the scene is built, then on viser's event loop; its result
        or its exception. ViewerUnavailable when the server has stopped or
        its loop does not take it within LOOP_TIMEOUT."""
        if self._closed:
            raise ViewerUnavailable("the view's server has stopped")
        if not self.admission.ready or threading.get_ident() == self._loop_thread:
            return function(*args)
        return self._on_loop(function, *args)

    def _on_loop(self, function: Callable, *args):
        """function(*args) run on viser's event loop, waited for (_call)."""
        result = concurrent.futures.Future()

        def run() -> None:
            if result.set_running_or_notify_cancel():
                try:
                    result.set_result(function(*args))
                except BaseException as error:  # noqa: BLE001  handed to the caller
                    result.set_exception(error)

        self._waiting.add(result)
        try:
            self._loop.call_soon_threadsafe(run)
            return result.result(LOOP_TIMEOUT)
        except (RuntimeError, concurrent.futures.CancelledError):  # the loop is closed; close() cancelled it
            if result.done() and not result.cancelled() and result.exception() is not None:
                raise  # function's own
            raise ViewerUnavailable("the view's server has stopped") from None
        except concurrent.futures.TimeoutError:
            result.cancel()
            raise ViewerUnavailable(f"the view's server did not take a change within {LOOP_TIMEOUT:g} s") from None
        finally:
            self._waiting.discard(result)

    def _add_visual(self, name: str, visual: Visual, meshes: dict):
        """The scene node of one visual, placed in its body's frame (viser's
        primitives are centred on their frame, as URDF's)."""
        pose = {"wxyz": _wxyz(visual.rotation), "position": visual.translation}
        color = _rgb(visual.rgba or DEFAULT_RGBA)
        opacity = None if visual.rgba is None or visual.rgba[3] >= 1.0 else float(visual.rgba[3])
        kind, size = visual.shape.kind, visual.shape.size
        if kind == "box":
            return self.scene.add_box(name, color=color, dimensions=tuple(size), opacity=opacity, **pose)
        if kind == "sphere":
            return self.scene.add_icosphere(name, radius=float(size[0]), color=color, opacity=opacity, **pose)
        if kind in ("cylinder", "capsule"):  # along z, as URDF's (three.js's cylinder is along y)
            import trimesh

            radius, length = float(size[0]), float(size[1])
            mesh = (trimesh.creation.cylinder(radius=radius, height=length, sections=32) if kind == "cylinder"
                    else trimesh.creation.capsule(height=length, radius=radius))
            return self.scene.add_mesh_simple(name, mesh.vertices, mesh.faces, color=color, opacity=opacity, **pose)
        mesh = self._mesh(visual, meshes)
        return self.scene.add_mesh_trimesh(name, mesh, scale=tuple(visual.shape.scale), **pose)

    @staticmethod
    def _mesh(visual: Visual, meshes: dict):
        import trimesh

        from mbs_dynamics.multibody.meshes import load_mesh

        key = (str(visual.path), visual.rgba)
        if key not in meshes:
            loaded = load_mesh(visual.path)
            if not isinstance(loaded, trimesh.Trimesh) or len(loaded.faces) == 0:
                raise ValueError("no triangles")
            if visual.rgba is not None or not loaded.visual.defined:
                loaded.visual = trimesh.visual.ColorVisuals(loaded, face_colors=np.array(
                    [int(round(255 * c)) for c in (visual.rgba or DEFAULT_RGBA)], dtype=np.uint8))
            meshes[key] = loaded
        return meshes[key]

    def show(self, q) -> None:
        """Pose the robot at configuration q (the model's; ValueError if unusable)."""
        world_R, world_p = body_poses(self.model, q)
        self._world_R, self._world_p = world_R, world_p
        self._call(self._pose, world_R, world_p)

    def _pose(self, world_R: np.ndarray, world_p: np.ndarray) -> None:
        with self.server.atomic():
            for frame, R, p in zip(self.body_frames, world_R, world_p, strict=True):
                frame.wxyz, frame.position = _wxyz(R), p
            if not self.robot.visible:
                self.robot.visible = True

    def show_world(self, ground_height: float | None, boxes) -> None:
        """The world drawn anew: the ground grid at ground_height (None: no
        grid), the static boxes (stepping.Box) in place of those before."""
        self._call(self._draw_world, ground_height, tuple(boxes))

    def _draw_world(self, ground_height: float | None, boxes) -> None:
        self.ground.visible = ground_height is not None
        if ground_height is not None:
            self.ground.position = (0.0, 0.0, float(ground_height))
        for handle in self.boxes:
            handle.remove()
        self.boxes = [self.scene.add_box(f"/world_boxes/{k}", color=BOX_COLOR, dimensions=tuple(box.size),
                                         wxyz=np.roll(box.orientation, 1), position=tuple(box.position))
                      for k, box in enumerate(boxes)]

    def show_contacts(self, frames, points, forces, scale: float = FORCE_SCALE) -> None:
        """Contact forces as arrows from each contact point (points (k, 3),
        in the link frames `frames`, at the pose last shown) along its force
        (forces (k, 3), world axes, N) times `scale` (m/N)."""
        if self._world_R is None:
            return
        starts = np.empty((len(frames), 3))
        for k, name in enumerate(frames):
            frame = self.model.frame(name)
            local = frame.rotation @ np.asarray(points[k], dtype=float) + frame.translation
            if frame.body < 0:
                starts[k] = local
            else:
                starts[k] = self._world_R[frame.body] @ local + self._world_p[frame.body]
        self._call(self._draw_contacts, arrows(starts, scale * np.asarray(forces, dtype=float).reshape(-1, 3)))

    def show_objects(self, shapes) -> None:
        """Free objects' shapes where they are, each (key, Shape (a mesh's
        filename a file:// URI or resolvable path), rgba (None: a mesh's own
        colours), quaternion (x, y, z, w), position) (markers.shapes_of_markers);
        those of keys not among them removed. A mesh that cannot be drawn is
        said once in `warnings` and left out."""
        self._call(self._draw_objects, list(shapes))

    def _draw_objects(self, shapes) -> None:
        from mbs_dynamics.multibody.meshes import measure
        from mbs_dynamics.multibody.resources import resolve

        keys = {key for key, *_ in shapes}
        for key in [key for key in self.objects if key not in keys]:
            self.objects.pop(key)[1].remove()
        with self.server.atomic():
            for key, shape, rgba, quaternion, position in shapes:
                drawn = (shape.kind, shape.size.tolist(), shape.scale.tolist(), shape.filename, rgba)
                known = self.objects.get(key)
                if known is None or known[0] != drawn:
                    if known is not None:
                        known[1].remove()
                    frame = self.scene.add_frame(f"/objects/{key}", show_axes=False)
                    try:
                        path = resolve(shape.filename) if shape.kind == "mesh" else None
                        if path is not None:
                            measure(path)  # within the caps of a mesh file
                        self._add_visual(f"/objects/{key}/shape", Visual(key, -1, np.eye(3), np.zeros(3), shape,
                                                                         path, rgba), self._object_meshes)
                    except Exception as error:  # noqa: BLE001  not found, beyond a cap, trimesh's many kinds
                        warning = f"object {key}: {shape.filename or shape.kind} cannot be drawn ({error}); not drawn"
                        if warning not in self.warnings:
                            self.warnings.append(warning)
                    known = self.objects[key] = (drawn, frame)
                known[1].wxyz, known[1].position = np.roll(quaternion, 1), position

    def _draw_contacts(self, segments: np.ndarray) -> None:
        if self.contact_lines is None or self.contact_lines.points.shape != segments.shape:
            if self.contact_lines is not None:
                self.contact_lines.remove()
            self.contact_lines = self.scene.add_line_segments(
                "/contact_forces", segments, np.broadcast_to(np.array(FORCE_COLOR, dtype=np.uint8), segments.shape),
                thickness=0.01)
        else:
            self.contact_lines.points = segments

    def show_momentum(self, com, linear, angular, scale: float = MOMENTUM_SCALE) -> None:
        """The centre of mass `com` (world, m) as a sphere, its linear momentum
        and the angular momentum about it as arrows from it times `scale`."""
        self._call(self._draw_momentum, np.asarray(com, dtype=float),
                   arrows(np.zeros((2, 3)), scale * np.array([linear, angular], dtype=float)))

    def _draw_momentum(self, com: np.ndarray, segments: np.ndarray) -> None:
        with self.server.atomic():
            self.com.position = com
            self.com.visible = True
            self.momentum.points = segments
            self.momentum.visible = True

    def show_com_reference(self, position) -> None:
        """A centre-of-mass reference (world, m) as a green sphere."""
        self._call(self._draw_com_reference, np.asarray(position, dtype=float))

    def _draw_com_reference(self, position: np.ndarray) -> None:
        with self.server.atomic():
            self.com_reference.position = position
            self.com_reference.visible = True

    def look_at(self, target, distance: float) -> None:
        """Where a browser that connects from now on looks from: `distance`
        from `target` (world), from the front-right and above."""
        target = np.asarray(target, dtype=float)
        self._call(self._look_at, target, target + distance * np.array([0.75, -0.55, 0.37]))

    def _look_at(self, target: np.ndarray, position: np.ndarray) -> None:
        self.server.initial_camera.look_at = target
        self.server.initial_camera.position = position

    def frame_robot(self, q) -> None:
        """Look at the robot at configuration q (its bodies' origins) from a
        distance that takes it all in."""
        _, world_p = body_poses(self.model, q)
        if not len(world_p):
            return
        low, high = world_p.min(axis=0), world_p.max(axis=0)
        self.look_at((low + high) / 2, max(1.2, 2.0 * float(np.linalg.norm(high - low))))

    # --- recording ----------------------------------------------------------------

    def start_recording(self) -> None:
        """Keep every update from now on (the scene as it is, then each change)."""
        # (viser's serializer takes its record lock: from any thread, as the rest of the recording)
        self.recording = self.server.get_scene_serializer()
        self._last_time = None

    def mark_time(self, seconds: float) -> None:
        """The updates that follow happen at `seconds` (e.g. simulated time):
        the recording waits the time since the last mark before them."""
        if self.recording is not None:
            if self._last_time is not None and seconds > self._last_time:
                self.recording.insert_sleep(seconds - self._last_time)
            self._last_time = seconds

    def save(self, path) -> Path:
        """Write the recording, which this ends, or the scene as it is when
        nothing is recorded, to `path`: a self-contained HTML page (.html), or
        viser's .viser file (replayed by its client at
        index.html?playbackPath=FILE). files.FileProblem (a ValueError) when
        it cannot be written, saying why."""
        path = Path(path)
        if path.suffix not in (".html", ".viser"):
            raise ValueError(f"a recording is a .html or .viser file, got {path.name}")
        recording, self.recording = self.recording or self.server.get_scene_serializer(), None
        return write_file(path, recording.as_html() if path.suffix == ".html" else recording.serialize(), "recording")

    def close(self) -> None:
        """Stop serving (the recording can still be saved)."""
        if not self._closed:
            self._closed = True
            for waiting in list(self._waiting):  # a change not yet taken will not be: its caller goes on
                waiting.cancel()
            self.server.stop()
