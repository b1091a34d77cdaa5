"""One model of a robot and free objects (the system a simulation steps):
each object, a URDF of its own, hangs from the world by a floating joint
named after it, its links and joints prefixed "<name>/"; the robot comes
first, so that its bodies, coordinates and frames keep their indices and
the robot's q and v are the first nq and nv of the system's. A model of
several trees: the algorithms take a forest as they take a tree."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from mbs_dynamics.multibody.model import JOINT_NQ, ROOT_JOINT, Model
from mbs_dynamics.multibody.parsers.urdf import JointDescription, RobotDescription

OBJECT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")  # a ROS name token: objects/<name>/odom


@dataclass(frozen=True)
class Part:
    """A free object in a system model: its name, its bodies (first body,
    count) and its coordinates in q and v (start, count)."""

    name: str
    first_body: int
    bodies: int
    q_start: int
    nq: int
    v_start: int
    nv: int

    @property
    def q_slice(self) -> slice:
        return slice(self.q_start, self.q_start + self.nq)

    @property
    def v_slice(self) -> slice:
        return slice(self.v_start, self.v_start + self.nv)


def _free_joint(name: str, parent: str, child: str) -> JointDescription:
    return JointDescription(name, "floating", parent, child, np.eye(4), np.array([0.0, 0.0, 1.0]), -np.inf, np.inf,
                            np.inf, np.inf, 0.0, 0.0, None)


def check_object_name(name: str, robot: Model) -> None:
    """ValueError unless `name` can name an object beside the robot."""
    if not isinstance(name, str) or not OBJECT_NAME.match(name):
        raise ValueError(f"an object's name must be a letter then letters, digits or '_', got {name!r}")
    if name in robot.description.joints or name in robot.description.links or name == ROOT_JOINT:
        raise ValueError(f"an object's name must not be a joint or link of the robot, got {name!r}")


def assemble(robot: Model, objects) -> tuple[Model, tuple[Part, ...]]:
    """(the system model, its Parts): the robot and the objects ((name,
    RobotDescription) each, names distinct) in one model (module docstring),
    with the robot's gravity, mimic handling and armature."""
    description = robot.description
    names = [name for name, _ in objects]
    if len(set(names)) != len(names):
        raise ValueError(f"objects must have distinct names, got {names}")
    links, joints = {}, {}
    if robot.floating_base:
        world = next(name for name in ("world", "mbs_world", "mbs_world_frame") if name not in description.links)
        links[world] = replace(next(iter(description.links.values())), name=world, inertial=None)
        joints[ROOT_JOINT] = _free_joint(ROOT_JOINT, world, description.root)
        root = world
    else:
        root = description.root  # fixed to the world
    links.update(description.links)
    joints.update(description.joints)
    armature = dict(robot.joint_armature)
    warnings = list(description.warnings)
    for name, part in objects:
        check_object_name(name, robot)

        def prefixed(x: str, name=name) -> str:
            return f"{name}/{x}"
        for link in part.links.values():
            links[prefixed(link.name)] = replace(link, name=prefixed(link.name))
        joints[name] = _free_joint(name, root, prefixed(part.root))
        for joint in part.joints.values():
            mimic = replace(joint.mimic, joint=prefixed(joint.mimic.joint)) if joint.mimic is not None else None
            joints[prefixed(joint.name)] = replace(joint, name=prefixed(joint.name), parent=prefixed(joint.parent),
                                                   child=prefixed(joint.child), mimic=mimic)
        armature.update({prefixed(joint): value for joint, value in part.armature.items()})
        warnings += [f"object '{name}': {warning}" for warning in part.warnings]
    system = Model(RobotDescription(description.name, root, links, joints, tuple(warnings),
                                    description.mimic_problems, {}),
                   floating_base=False, mimic=robot.mimic, gravity=robot.gravity, armature=armature)
    parts = []
    for name, _ in objects:
        body = system.body_joint_names.index(name)
        end = body + 1
        while end < system.nbodies and system.parent[end] >= body:  # pre-order: its subtree, up to the next root
            end += 1
        subtree = range(body, end)
        q_stop = max(int(system.q_start[b]) + JOINT_NQ[int(system.joint_type[b])] for b in subtree)
        v_stop = max(int(system.v_start[b]) + int(system.nv_joint[b]) for b in subtree)
        q_start, v_start = int(system.q_start[body]), int(system.v_start[body])
        parts.append(Part(name, body, end - body, q_start, q_stop - q_start, v_start, v_stop - v_start))
    return system, tuple(parts)
