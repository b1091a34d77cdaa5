"""The simulator's free objects at run time: ~/spawn and ~/delete (those of
world_objects come with the scene; outputs.ObjectOutputs publishes them),
and the robot's SRDF for self-collision (robot_description_semantic).

A spawn is checked in full before the simulation is held (a malformed or
massless URDF, no collision geometry, a bad name, pose or twist); then,
under the simulation's lock, a duplicate name, the max_objects bound, and
where it goes (placement.placed_object: lifted clear of the ground and the
boxes, refused inside the robot or another object). Refusals are counted
(refused_spawns, refused_deletes) and said in the answer.
"""
from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from mbs_dynamics.multibody.assembly import OBJECT_NAME
from mbs_dynamics.multibody.parsers.srdf import disabled_collisions
from mbs_dynamics.ros.conversions import InvalidInput, base_state
from mbs_dynamics.ros.robot_node import WARNING_PERIOD
from mbs_dynamics.ros.simulator.stepping_thread import BusyError
from mbs_dynamics.simulation.objects import WorldObject
from mbs_dynamics.simulation.placement import placed_object
from mbs_dynamics.simulation.scene import WORLD_EXTENT

# The SRDF topic, as MoveIt's move_group publishes it: latched.
SEMANTIC_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL)


def check_room(objects, name: str, most: int) -> None:
    """ValueError unless an object `name` can join `objects`: no other of that
    name, fewer than `most` of them."""
    if any(thing.name == name for thing in objects):
        raise ValueError(f"the world has an object '{name}' already: ~/delete it first, or choose another name")
    if len(objects) >= most:
        raise ValueError(f"the world holds {len(objects)} objects, max_objects: ~/delete one first")


def requested_object(node, request) -> WorldObject:
    """The WorldObject a ~/spawn request asks for, before the simulation is
    held: the quick refusals first (name, count), then the URDF; ValueError
    (InvalidInput) saying what is wrong."""
    name = request.name
    if not OBJECT_NAME.match(name):
        raise ValueError(f"an object's name must be a letter then letters, digits or '_', got {name[:80]!r}")
    check_room(node.simulation.world.objects, name, node.parameter("max_objects"))  # before the URDF's work
    q, v = base_state(request.initial_pose, request.initial_twist, what="initial_pose")
    if abs(q[:3]).max() > WORLD_EXTENT:
        raise ValueError(f"initial_pose position {q[:3].tolist()}: each coordinate at most {WORLD_EXTENT:g} m "
                         "from the origin")
    return WorldObject(name, request.xml, position=tuple(q[:3]), orientation=tuple(q[3:]), twist=tuple(v),
                       search_paths=node.mesh_search_paths())


def spawn(node, request, response):
    """~/spawn: the object joins the world, or the answer says why not."""
    try:
        thing = requested_object(node, request)
        with node.stepping.service_lock():
            simulation, scene = node.simulation, node.settings.scene
            objects = simulation.world.objects
            check_room(objects, thing.name, node.parameter("max_objects"))  # another spawn may have come between
            whole = scene.world_with((*objects, thing))
            if not node.model.floating_base:  # the ground objects rest on comes with the first
                scene.lifted_clear(simulation.q, "the robot where it is, above the ground objects rest on", whole)
            thing, said = placed_object(simulation, thing, whole)
            simulation.set_world(scene.world_with((*objects, thing)))
            node.stepping.step_times.clear()  # a step may now cost more
            t = simulation.time
    except (BusyError, InvalidInput, ValueError) as error:
        node.counts["refused_spawns"] += 1
        node.get_logger().warning(f"~/spawn '{request.name[:80]}' refused: {error} "
                                  f"({node.counts['refused_spawns']} so far)", throttle_duration_sec=WARNING_PERIOD)
        response.success, response.status_message = False, str(error)
        return response
    node.stepping.wake()
    if len(objects) == 0 and not node.model.floating_base:
        node.publish_world()  # the ground came with the first object
    message = f"object '{thing.name}' spawned at t = {t:.6f} s" + (f"; {said}" if said else "")
    node.get_logger().info(message)
    response.success, response.status_message = True, message
    return response


def delete(node, request, response):
    """~/delete: the object leaves the world, or the answer says there is none."""
    try:
        with node.stepping.service_lock():
            simulation = node.simulation
            objects = simulation.world.objects
            rest = tuple(thing for thing in objects if thing.name != request.name)
            if len(rest) == len(objects):
                names = ", ".join(thing.name for thing in objects[:20]) or "none"
                raise ValueError(f"the world has no object '{request.name[:80]}' (objects: {names}"
                                 + (", ..." if len(objects) > 20 else "") + ")")
            simulation.set_world(node.settings.scene.world_with(rest))
            node.stepping.step_times.clear()
    except (BusyError, ValueError) as error:
        node.counts["refused_deletes"] += 1
        response.success, response.status_message = False, str(error)
        return response
    if not rest and not node.model.floating_base:
        node.publish_world()  # the ground went with the last object
    node.get_logger().info(f"object '{request.name}' deleted")
    response.success, response.status_message = True, f"object '{request.name}' deleted"
    return response


class SemanticDescription:
    """The robot's SRDF: its disabled collision pairs from the parameter
    robot_description_semantic, else from the latched topic of that name
    (MoveIt's), applied to the world when it arrives; a malformed one is
    said and dropped, the pairs before it kept."""

    def __init__(self, node):
        self.node = node
        xml = node.parameter("robot_description_semantic")
        self.pairs = disabled_collisions(xml) if xml else ()  # a bad parameter: the node does not start
        if not xml:
            node.create_subscription(String, "robot_description_semantic", self._on_message, SEMANTIC_QOS)

    def _on_message(self, message: String) -> None:
        node = self.node
        try:
            pairs = disabled_collisions(message.data)
        except ValueError as error:
            node.drop("invalid", f"robot_description_semantic: {error}")
            return
        if pairs == self.pairs:
            return
        self.pairs = pairs
        node.apply_collision_pairs()
        node.get_logger().info(f"robot_description_semantic: {len(pairs)} link pairs that never collide")
