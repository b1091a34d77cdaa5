"""The simulated world as visualization_msgs/MarkerArray, drawn by the view
and by RViz, and back:

    world     (transient local, published when it changes) the ground, a
              thin CUBE of namespace GROUND_MARKERS, its top at the ground's
              height; each static box a CUBE of BOX_MARKERS
    objects   (at publish_rate) every free object's visuals where they are:
              namespace the object's name, one marker per visual (CUBE,
              SPHERE, CYLINDER (a capsule drawn as the cylinder of its full
              length), MESH_RESOURCE with a file:// URI), after a DELETEALL:
              each message holds them all
"""
from __future__ import annotations

import math

import numpy as np
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from visualization_msgs.msg import Marker, MarkerArray

from mbs_dynamics.multibody.parsers.geometry import Shape
from mbs_dynamics.ros.conversions import InvalidInput, first_nonfinite_field, set_vector, vector_values
from mbs_dynamics.simulation.scene import MAX_WORLD_BOXES
from mbs_dynamics.simulation.simulation import World
from mbs_dynamics.simulation.stepping.obstacles import Box
from mbs_dynamics.view.visuals import DEFAULT_RGBA

# The world as visualization_msgs/MarkerArray (the simulator's topic `world`, drawn by the view and by RViz): the
# ground a thin CUBE of namespace GROUND_MARKERS, its top at the ground's height; each box a CUBE of BOX_MARKERS.
GROUND_MARKERS, BOX_MARKERS = "ground", "world_boxes"
GROUND_DRAWN = (100.0, 100.0, 0.01)  # m: the ground's marker (a plane has no extent)
MARKER_COLOR = (0.6, 0.6, 0.6, 1.0)
# The world is published at start and again when it changes: kept for a subscriber that comes later.
WORLD_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)


# The most markers of one objects message (100 objects of up to 100 visuals).
MAX_OBJECT_MARKERS = 10_000
# An object marker's shape: Marker type -> the URDF shape it draws.
MARKER_SHAPES = {Marker.CUBE: "box", Marker.SPHERE: "sphere", Marker.CYLINDER: "cylinder",
                 Marker.MESH_RESOURCE: "mesh"}


def world_markers(world: World, frame_id: str) -> MarkerArray:
    """The ground and the boxes of `world` as markers in frame_id, after one
    that deletes those of an earlier world."""
    markers = [Marker(action=Marker.DELETEALL)]
    if world.ground is not None:
        x, y, thickness = GROUND_DRAWN
        marker = Marker(ns=GROUND_MARKERS, id=0, type=Marker.CUBE, action=Marker.ADD)
        marker.pose.position.z = world.ground.height - thickness / 2
        set_vector(marker.scale, GROUND_DRAWN)
        markers.append(marker)
    for k, box in enumerate(world.boxes):
        marker = Marker(ns=BOX_MARKERS, id=k, type=Marker.CUBE, action=Marker.ADD)
        set_vector(marker.pose.position, box.position)
        o = marker.pose.orientation
        o.x, o.y, o.z, o.w = (float(x) for x in box.orientation)
        set_vector(marker.scale, box.size)
        markers.append(marker)
    for marker in markers[1:]:
        marker.header.frame_id = frame_id
        marker.color.r, marker.color.g, marker.color.b, marker.color.a = MARKER_COLOR
    return MarkerArray(markers=markers)


def world_of_markers(message: MarkerArray) -> tuple[float | None, tuple[Box, ...]]:
    """(The ground's height, None without a ground; the boxes) of a world's
    markers (world_markers); InvalidInput for too many or a bad one."""
    if len(message.markers) > MAX_WORLD_BOXES + 2:
        raise InvalidInput("invalid", f"world: {len(message.markers)} markers: at most {MAX_WORLD_BOXES + 2}")
    height, boxes = None, []
    for marker in message.markers:
        if marker.action != Marker.ADD or marker.ns not in (GROUND_MARKERS, BOX_MARKERS):
            continue
        wrong = first_nonfinite_field(marker)
        if wrong is not None:
            raise InvalidInput("invalid", f"world: marker {marker.ns}/{marker.id} has {wrong} not finite")
        if marker.ns == GROUND_MARKERS:
            height = marker.pose.position.z + marker.scale.z / 2
            continue
        o = marker.pose.orientation
        try:
            boxes.append(Box(vector_values(marker.scale), vector_values(marker.pose.position),
                             np.array([o.x, o.y, o.z, o.w]) / (math.hypot(o.x, o.y, o.z, o.w) or 1.0)))
        except ValueError as error:
            raise InvalidInput("invalid", f"world: marker {marker.ns}/{marker.id}: {error}") from None
    return height, tuple(boxes)


def set_pose(pose, rotation_xyzw, translation) -> None:
    set_vector(pose.position, translation)
    o = pose.orientation
    o.x, o.y, o.z, o.w = (float(x) for x in rotation_xyzw)


def object_markers(objects, frame_id: str, stamp) -> MarkerArray:
    """The `objects` markers (module docstring) of (name, its Visuals
    (view.visuals.link_visuals), their world rotations as quaternions (k, 4;
    x, y, z, w), translations (k, 3)) for each object."""
    markers = [Marker(action=Marker.DELETEALL)]
    for name, visuals, quaternions, translations in objects:
        for k, visual in enumerate(visuals):
            marker = Marker(ns=name, id=k, action=Marker.ADD)
            marker.header.frame_id, marker.header.stamp = frame_id, stamp
            set_pose(marker.pose, quaternions[k], translations[k])
            kind, size = visual.shape.kind, visual.shape.size
            if kind == "box":
                marker.type, scale = Marker.CUBE, size
            elif kind == "sphere":
                marker.type, scale = Marker.SPHERE, [2 * size[0]] * 3
            elif kind in ("cylinder", "capsule"):
                length = size[1] + (2 * size[0] if kind == "capsule" else 0.0)
                marker.type, scale = Marker.CYLINDER, [2 * size[0], 2 * size[0], length]
            else:
                marker.type, scale = Marker.MESH_RESOURCE, visual.shape.scale
                marker.mesh_resource = visual.path.resolve().as_uri()
                marker.mesh_use_embedded_materials = visual.rgba is None
            set_vector(marker.scale, scale)
            c = marker.color
            c.r, c.g, c.b, c.a = (float(x) for x in (visual.rgba or DEFAULT_RGBA))
            markers.append(marker)
    return MarkerArray(markers=markers)


def shapes_of_markers(message: MarkerArray) -> list[tuple[str, Shape, tuple | None, np.ndarray, np.ndarray]]:
    """(key 'ns/id', the URDF Shape it draws (a mesh's filename its URI), its
    rgba (None: a mesh's own colours), quaternion (x, y, z, w), position) of
    each ADD marker of an `objects` message; InvalidInput for too many, a
    non-finite one, a bad quaternion, a type not drawn."""
    if len(message.markers) > MAX_OBJECT_MARKERS + 1:
        raise InvalidInput("invalid", f"objects: {len(message.markers)} markers: at most {MAX_OBJECT_MARKERS}")
    shapes = []
    for marker in message.markers:
        if marker.action != Marker.ADD:
            continue
        key = f"{marker.ns}/{marker.id}"
        wrong = first_nonfinite_field(marker)
        if wrong is not None:
            raise InvalidInput("invalid", f"objects: marker {key[:80]} has {wrong} not finite")
        kind = MARKER_SHAPES.get(marker.type)
        if kind is None:
            raise InvalidInput("invalid", f"objects: marker {key[:80]} of type {marker.type}: the view draws "
                                          "cubes, spheres, cylinders and meshes")
        o = marker.pose.orientation
        quaternion = np.array([o.x, o.y, o.z, o.w])
        if abs(math.hypot(*quaternion) - 1.0) > 1e-3:
            raise InvalidInput("invalid", f"objects: marker {key[:80]} has no unit quaternion")
        scale = np.array(vector_values(marker.scale))
        if not np.all(scale > 0):
            raise InvalidInput("invalid", f"objects: marker {key[:80]} has scale {scale.tolist()}: each > 0")
        size = {"box": scale, "sphere": np.array([scale[0] / 2]), "cylinder": np.array([scale[0] / 2, scale[2]]),
                "mesh": np.zeros(0)}[kind]
        shape = Shape(kind, size, marker.mesh_resource, scale) if kind == "mesh" else Shape(kind, size)
        c = marker.color
        rgba = None if kind == "mesh" and marker.mesh_use_embedded_materials else (c.r, c.g, c.b, c.a)
        shapes.append((key, shape, rgba, quaternion / np.linalg.norm(quaternion),
                       np.array(vector_values(marker.pose.position))))
    return shapes
