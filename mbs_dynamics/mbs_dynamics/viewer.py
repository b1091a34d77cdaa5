"""A 3-D view of a robot in the browser, served from this process on
localhost by viser (its client is bundled in the package: the page works
offline), without ROS:

    viewer = Viewer(model, urdf_xml)          # serving on viewer.url
    viewer.show(q)                            # the robot at q
    viewer.show_contacts(frames, points, forces)
    viewer.show_momentum(com, linear, angular)
    viewer.save("run.html")                   # everything shown so far

The scene: the ground grid (z up) and the world's boxes, one scene frame per
body (hidden until the first pose) posed by forward kinematics
(kinematics.body_poses), the body's visuals in it
(visuals.link_visuals: meshes through trimesh, primitives drawn), contact
forces as arrows from their points (FORCE_SCALE m per N), the centre of mass
as a sphere with its linear momentum (MOMENTUM_SCALE m per kg m/s) and
angular momentum about it (m per kg m^2/s) as arrows.

Updates are the latest state only: viser sends a scene node's newest pose
and drops the unsent ones, so a slow or disconnected browser never makes
work queue up. A recording (start_recording, then save once) keeps every
update with the time between them, to replay as a self-contained HTML page
or a .viser file (viser's player).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mbs_dynamics.kinematics import body_poses
from mbs_dynamics.lie import matrix_to_quaternion
from mbs_dynamics.model import Model
from mbs_dynamics.visuals import DEFAULT_RGBA, Visual, link_visuals

FORCE_SCALE = 0.002
MOMENTUM_SCALE = 0.05
FORCE_COLOR = (230, 40, 40)
LINEAR_MOMENTUM_COLOR = (40, 120, 230)
ANGULAR_MOMENTUM_COLOR = (150, 60, 200)
COM_COLOR = (250, 200, 0)
BOX_COLOR = (150, 160, 175)
ARROW_HEAD = 0.05


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


class Viewer:
    """The view of one robot (module docstring). Visuals that cannot be
    drawn (a mesh file trimesh cannot read) are left out and listed in
    `warnings`, with those of visuals.link_visuals."""

    def __init__(self, model: Model, urdf_xml: str, search_paths=(), host: str = "127.0.0.1", port: int = 8080,
                 source: str = "visual", title: str = "", ground_height: float = 0.0, boxes=()):
        """boxes: the world's static time_stepping.Box (a step, a table),
        drawn; the ground grid at ground_height."""
        import viser

        self.model = model
        visuals, warnings = link_visuals(model, urdf_xml, search_paths, source)
        self.warnings = list(warnings)
        self.server = viser.ViserServer(host=host, port=port, label=title or model.name, verbose=False)
        # no share button: sharing goes through viser's relay on the internet; the page stays on this machine
        self.server.gui.configure_theme(control_width="small", show_share_button=False)
        self.scene = self.server.scene
        self.scene.set_up_direction("+z")
        self.ground = self.scene.add_grid("/ground", width=10.0, height=10.0, cell_size=0.25, section_size=1.0,
                                          position=(0.0, 0.0, float(ground_height)))
        self.boxes = [self.scene.add_box(f"/world_boxes/{k}", color=BOX_COLOR, dimensions=tuple(box.size),
                                         wxyz=np.roll(box.orientation, 1), position=tuple(box.position))
                      for k, box in enumerate(boxes)]
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
        self.com = self.scene.add_icosphere("/com", radius=0.03, color=COM_COLOR, visible=False)
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
        host = self.server.get_host()
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{self.server.get_port()}/"

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

        from mbs_dynamics.meshes import load_mesh

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
        with self.server.atomic():
            for frame, R, p in zip(self.body_frames, world_R, world_p, strict=True):
                frame.wxyz, frame.position = _wxyz(R), p
            if not self.robot.visible:
                self.robot.visible = True

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
        segments = arrows(starts, scale * np.asarray(forces, dtype=float).reshape(-1, 3))
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
        com = np.asarray(com, dtype=float)
        with self.server.atomic():
            self.com.position = com
            self.com.visible = True
            self.momentum.points = arrows(np.zeros((2, 3)), scale * np.array([linear, angular], dtype=float))
            self.momentum.visible = True

    def look_at(self, target, distance: float) -> None:
        """Where a browser that connects from now on looks from: `distance`
        from `target` (world), from the front-right and above."""
        target = np.asarray(target, dtype=float)
        self.server.initial_camera.look_at = target
        self.server.initial_camera.position = target + distance * np.array([0.75, -0.55, 0.37])

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
        index.html?playbackPath=FILE)."""
        path = Path(path)
        if path.suffix not in (".html", ".viser"):
            raise ValueError(f"a recording is a .html or .viser file, got {path.name}")
        recording, self.recording = self.recording or self.server.get_scene_serializer(), None
        if path.suffix == ".html":
            path.write_text(recording.as_html(), encoding="utf-8")
        else:
            path.write_bytes(recording.serialize())
        return path

    def close(self) -> None:
        self.server.stop()
