"""Model: the constant description of a robot that every algorithm reads.

A body is what a joint with coordinates moves; links attached by fixed joints
are merged into their parent body (inertia lumped), their frames kept
addressable by name. Bodies are numbered in depth-first pre-order from the
root (DESIGN.md §2), parent[i] < i, parent -1 = the world.

Everything the compiled recursions need is a flat per-body array:

    parent[i]                 parent body, -1 for the world
    joint_type[i]             REVOLUTE, PRISMATIC, PLANAR or FLOATING
    q_start[i], v_start[i]    first coordinate of the body's joint in q and v
    coupling[i] = (multiplier, offset)
                              a joint coupled to another's coordinate (mimic):
                              q = multiplier * q[q_start] + offset; (1, 0) otherwise
    tree_rotation[i], tree_translation[i]
                              parent body frame <- joint frame at q = 0
    axis[i], plane[i]         joint axis (joint frame); for PLANAR, the two
                              in-plane unit vectors
    mass[i], first_moment[i], rotational_inertia[i]
                              spatial inertia in the body frame, as m, h = m c
                              and the rotational inertia about the body origin
    nv_joint[i]               number of velocity coordinates of the body's joint
    shared_coordinates[0]     1 when a body's coordinates do not all come after its
                              predecessor's (a coupled mimic joint moves its master's:
                              a coordinate two bodies move), else 0

and per velocity coordinate, armature[k] (the reflected rotor inertia the
RNEA, CRBA and ABA add to M's diagonal) and dof_parent[k]: the coordinate before k on the
path to the root (-1 at the root), so that M[k, j] != 0 only for j on that
path (branch-induced sparsity, Featherstone RBDA §6.5); a plain chain
k - 1 when mimic couplings put nonzeros elsewhere.

The kernels receive them packed into two arrays, model.packed, and read them
by name (ModelArrays, unpack_model); the functions' fast paths from Python,
in one (model.packed_flat, unflatten), which also carries every named
frame's placement in its body (frame_placement, by model.frame_numbers).
"""
from __future__ import annotations

import threading
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
from numba import njit

from mbs_dynamics.multibody.parsers.urdf import (
    DEFAULT_STRIBECK_VELOCITY,
    RobotDescription,
    URDFError,
    parse_urdf_file,
    parse_urdf_string,
)
from mbs_dynamics.multibody.workspace import float_view, readonly, take, take_unchecked, unbounded

REVOLUTE, PRISMATIC, PLANAR, FLOATING = 0, 1, 2, 3
JOINT_TYPE_CODES = {"revolute": REVOLUTE, "continuous": REVOLUTE, "prismatic": PRISMATIC,
                    "planar": PLANAR, "floating": FLOATING}
JOINT_NQ = {REVOLUTE: 1, PRISMATIC: 1, PLANAR: 3, FLOATING: 7}
JOINT_NV = {REVOLUTE: 1, PRISMATIC: 1, PLANAR: 3, FLOATING: 6}

ROOT_JOINT = "root_joint"


@dataclass(frozen=True)
class Frame:
    """A link frame: the body that carries it and its placement in that body."""

    name: str
    body: int  # -1: fixed to the world
    rotation: np.ndarray  # (3, 3) body frame <- link frame
    translation: np.ndarray  # (3,) link origin in the body frame


class Model:
    """A robot's constant model. Build it with from_urdf_file / from_urdf_string."""

    def __init__(self, description: RobotDescription, floating_base: bool = False,
                 mimic: str = "coupled", gravity=(0.0, 0.0, -9.81), armature=None):
        """armature: {joint: reflected rotor inertia} over the URDF's transmissions
        (parsers.urdf), for revolute and prismatic joints; a coupled mimic
        joint's adds multiplier² times it to its master's coordinate."""
        if mimic not in ("coupled", "independent"):
            raise ValueError(f"mimic must be 'coupled' or 'independent', got {mimic!r}")
        gravity = np.asarray(gravity, dtype=float)
        if gravity.shape != (3,) or not np.all(np.isfinite(gravity)):
            raise ValueError(f"gravity must be 3 finite numbers, got {gravity.tolist()}")
        self.name = description.name
        self.description = description
        self.floating_base = bool(floating_base)
        self.mimic = mimic
        self.gravity = gravity
        self.gravity.setflags(write=False)
        self.scratch = threading.local()  # per-thread scratch memory of the algorithms (workspace.py)
        self.joint_armature = dict(description.armature, **_checked_armature(armature))  # joint -> value
        _Builder(self, description, self.joint_armature).build()
        for array in vars(self).values():
            if isinstance(array, np.ndarray):
                array.setflags(write=False)

    @classmethod
    def from_urdf_file(cls, path, floating_base=False, mimic="coupled", gravity=(0.0, 0.0, -9.81),
                       strict=False, armature=None) -> Model:
        return cls(parse_urdf_file(path, strict=strict), floating_base, mimic, gravity, armature)

    @classmethod
    def from_urdf_string(cls, xml, floating_base=False, mimic="coupled", gravity=(0.0, 0.0, -9.81),
                         strict=False, armature=None) -> Model:
        return cls(parse_urdf_string(xml, strict=strict), floating_base, mimic, gravity, armature)

    # --- names and indices ---------------------------------------------

    @property
    def frame_names(self) -> list[str]:
        return list(self.frames)

    def q_index(self, joint: str) -> int:
        """First index of a joint's coordinates in q."""
        return self._joint_index(joint, self._q_index)

    def v_index(self, joint: str) -> int:
        """First index of a joint's coordinates in v."""
        return self._joint_index(joint, self._v_index)

    def _joint_index(self, joint: str, table: dict[str, int]) -> int:
        if joint not in table:
            mimic = " (a mimic joint: it has no coordinate of its own)" if joint in self._coupled else ""
            raise ValueError(f"model '{self.name}' has no joint '{joint}' with coordinates{mimic}")
        return table[joint]

    def mimic_masters(self) -> dict[str, str]:
        """{coupled mimic joint: the joint whose coordinate it follows} (through
        mimics of mimics)."""
        masters = {}
        for name in self._coupled:
            master = name
            while master in self._coupled:
                master = self.description.joints[master].mimic.joint
            masters[name] = master
        return masters

    def velocity_joint(self, k: int) -> str:
        """The joint that owns velocity coordinate k."""
        return next(name for name in reversed(self.joint_names) if self._v_index[name] <= k)

    def frame(self, name: str) -> Frame:
        frame = self.frames.get(name)
        if frame is None:
            raise ValueError(f"model '{self.name}' has no frame '{name}'")
        return frame

    def neutral_configuration(self) -> np.ndarray:
        q = np.zeros(self.nq)
        for body in range(self.nbodies):
            if self.joint_type[body] == FLOATING:
                q[self.q_start[body] + 6] = 1.0
        return q

    def __reduce__(self):
        """Pickled as what builds it (its scratch is per process): for Dask's workers."""
        return Model, (self.description, self.floating_base, self.mimic, tuple(self.gravity), self.joint_armature)

    def __repr__(self):
        return (f"Model('{self.name}', nq={self.nq}, nv={self.nv}, bodies={self.nbodies}, "
                f"floating_base={self.floating_base}, mass={self.total_mass:.6g} kg)")


class _Builder:
    """Turns a RobotDescription into the Model's arrays."""

    def __init__(self, model: Model, description: RobotDescription, armature: dict[str, float]):
        self.model = model
        self.description = description
        self.armature = armature

    def build(self):
        model, description = self.model, self.description
        joints = list(description.joints.values())
        coupled = {j.name for j in joints if j.mimic is not None and model.mimic == "coupled"}
        warnings = list(description.warnings)
        if description.mimic_problems and model.mimic == "coupled":
            raise URDFError(f"{description.mimic_problems[0]} (mimic='independent' loads mimic joints as free "
                            "joints)")
        warnings += [f"{problem}: unused, mimic='independent'" for problem in description.mimic_problems]
        if model.floating_base and ROOT_JOINT in description.joints:
            raise URDFError(f"the URDF has a joint named '{ROOT_JOINT}', the name of the floating base joint that "
                            "floating_base adds: rename it, or load the robot without floating_base")

        parent, joint_type, axis, plane, tree_rotation, tree_translation = [], [], [], [], [], []
        joint_of_body: list[str] = []
        placement: dict[str, tuple[int, np.ndarray, np.ndarray]] = {}  # link -> (body, R, p)
        inertias: list[list] = []  # per body: (mass, com, inertia about com), in the body frame

        def add_body(parent_body, kind, rotation, translation, joint_axis, name):
            parent.append(parent_body)
            joint_type.append(kind)
            tree_rotation.append(rotation)
            tree_translation.append(translation)
            axis.append(joint_axis)
            plane.append(plane_basis(joint_axis))
            joint_of_body.append(name)
            inertias.append([])
            return len(parent) - 1

        root = description.root
        if model.floating_base:
            body = add_body(-1, FLOATING, np.eye(3), np.zeros(3), np.array([0.0, 0.0, 1.0]), ROOT_JOINT)
            placement[root] = (body, np.eye(3), np.zeros(3))
        else:
            placement[root] = (-1, np.eye(3), np.zeros(3))

        for joint in joints:
            parent_body, rotation, translation = placement[joint.parent]
            # parent body frame <- joint frame at q = 0
            origin_rotation = rotation @ joint.origin[:3, :3]
            origin_translation = rotation @ joint.origin[:3, 3] + translation
            if joint.type == "fixed":
                placement[joint.child] = (parent_body, origin_rotation, origin_translation)
                continue
            body = add_body(parent_body, JOINT_TYPE_CODES[joint.type], origin_rotation, origin_translation,
                            joint.axis.copy(), joint.name)
            placement[joint.child] = (body, np.eye(3), np.zeros(3))

        for link in description.links.values():
            body, rotation, translation = placement[link.name]
            if link.inertial is not None and body >= 0:
                inertias[body].append((link.inertial.mass, rotation @ link.inertial.com + translation,
                                       rotation @ link.inertial.inertia @ rotation.T))

        nbodies = len(parent)
        model.nbodies = nbodies
        model.parent = np.array(parent, dtype=np.int64)
        model.joint_type = np.array(joint_type, dtype=np.int64)
        model.axis = np.array(axis, dtype=float).reshape(nbodies, 3)
        model.plane = np.array(plane, dtype=float).reshape(nbodies, 2, 3)
        model.tree_rotation = np.array(tree_rotation, dtype=float).reshape(nbodies, 3, 3)
        model.tree_translation = np.array(tree_translation, dtype=float).reshape(nbodies, 3)
        model.body_joint_names = tuple(joint_of_body)

        # Spatial inertia of each body at its origin: m, h = m c, I_O = I_C + m (|c|^2 1 - c c^T).
        model.mass = np.zeros(nbodies)
        model.first_moment = np.zeros((nbodies, 3))
        model.rotational_inertia = np.zeros((nbodies, 3, 3))
        for body, parts in enumerate(inertias):
            for mass, com, inertia in parts:
                model.mass[body] += mass
                model.first_moment[body] += mass * com
                model.rotational_inertia[body] += inertia + mass * (com @ com * np.eye(3) - np.outer(com, com))
        model.total_mass = float(model.mass.sum())
        # The size of the robot's inertias: what "singular" is measured against (aba.SINGULAR_PIVOT).
        model.inertia_scale = max(1e-300, float(model.mass.max(initial=0.0)),
                                  float(np.abs(model.rotational_inertia).max(initial=0.0)))

        # Coordinates: joints own them in body order; coupled mimics borrow their master's.
        by_name = {name: body for body, name in enumerate(joint_of_body)}
        q_start = np.zeros(nbodies, dtype=np.int64)
        v_start = np.zeros(nbodies, dtype=np.int64)
        coupling = np.tile([1.0, 0.0], (nbodies, 1))
        model.joint_names, model._q_index, model._v_index = [], {}, {}
        nq = nv = 0
        for body, name in enumerate(joint_of_body):
            if name in coupled:
                continue
            q_start[body], v_start[body] = nq, nv
            model.joint_names.append(name)
            model._q_index[name], model._v_index[name] = nq, nv
            nq += JOINT_NQ[joint_type[body]]
            nv += JOINT_NV[joint_type[body]]
        for body, name in enumerate(joint_of_body):
            if name not in coupled:
                continue
            multiplier, offset, master = 1.0, 0.0, name
            while master in coupled:  # a mimic of a mimic: compose the couplings
                mimic = description.joints[master].mimic
                multiplier, offset = multiplier * mimic.multiplier, offset + multiplier * mimic.offset
                master = mimic.joint
            if master not in by_name:
                raise URDFError(f"joint '{name}' mimics '{master}', which is fixed")
            q_start[body], v_start[body] = q_start[by_name[master]], v_start[by_name[master]]
            coupling[body] = (multiplier, offset)
        model.nq, model.nv = nq, nv
        # the shapes of M and of a Jacobian or A_G: the per-call functions' results (a tuple made per call: 40 ns)
        model.mass_matrix_shape, model.jacobian_shape = (nv, nv), (6, nv)
        model.q_start, model.v_start, model.coupling = q_start, v_start, coupling
        model._coupled = frozenset(coupled)
        model.joint_names = tuple(model.joint_names)
        model.has_coupled_joints = bool(coupled)

        # Frames: every link, placed on its body.
        model.frames = {name: Frame(name, body, rotation, translation)
                        for name, (body, rotation, translation) in placement.items()}
        for frame in model.frames.values():
            frame.rotation.setflags(write=False)
            frame.translation.setflags(write=False)

        self._limits(by_name)
        self._armature(coupled)
        inert = self._joints_moving_nothing()
        if inert:
            warnings.append(f"{len(inert)} joints move no mass or inertia (massless links at the end of a chain): "
                            f"{', '.join(inert)}; the mass matrix is singular, so forward dynamics and simulation "
                            "refuse this model (inverse dynamics works)")
        model.warnings = tuple(warnings)

        # (first index in q, joint name) of every floating joint's quaternion
        model.quaternions = tuple((int(model.q_start[b]) + 3, joint_of_body[b]) for b in range(nbodies)
                                  if joint_type[b] == FLOATING)

        model.quaternion_starts = np.array([start for start, _ in model.quaternions], dtype=np.int64)
        model.nv_joint = np.array([JOINT_NV[kind] for kind in joint_type], dtype=np.int64)
        ends = model.v_start + model.nv_joint
        model.shared_coordinates = np.array([int(np.any(model.v_start[1:] < ends[:-1]))], dtype=np.int64)
        model.dof_parent = self._dof_parents()
        self._pack()

    def _joints_moving_nothing(self) -> list[str]:
        """The joints with coordinates whose bodies' subtrees all have zero mass
        and rotational inertia: their column of M is zero."""
        model = self.model
        inert = (model.mass == 0) & np.all(model.rotational_inertia == 0, axis=(1, 2))
        subtree_inert = inert.copy()
        for body in range(model.nbodies - 1, -1, -1):  # children come after their parent
            parent = model.parent[body]
            if parent >= 0 and not subtree_inert[body]:
                subtree_inert[parent] = False
        return [name for name in model.joint_names
                if np.all(subtree_inert[model.v_start == model.v_index(name)])]

    def _dof_parents(self) -> np.ndarray:
        """Each coordinate's parent on the path to the root; a tree with
        coupled mimic joints as a plain chain over its coordinates (the
        coupling puts nonzeros off the paths), each other tree of a forest
        (multibody.assembly) with its own sparsity."""
        model = self.model
        dof_parent = np.full(model.nv, -1, dtype=np.int64)
        last = np.full(model.nbodies, -1, dtype=np.int64)  # a body's last coordinate
        for body in range(model.nbodies):
            above = last[model.parent[body]] if model.parent[body] >= 0 else -1
            start = model.v_start[body]
            for k in range(model.nv_joint[body]):
                dof_parent[start + k] = above if k == 0 else start + k - 1
            last[body] = start + model.nv_joint[body] - 1
        if not model.has_coupled_joints:
            return dof_parent
        coupled = [b for b, name in enumerate(model.body_joint_names) if name in model._coupled]
        for root in np.flatnonzero(model.parent < 0):
            end = root + 1
            while end < model.nbodies and model.parent[end] >= root:  # pre-order: the root's subtree
                end += 1
            first = model.v_start[root]
            stop = max(model.v_start[b] + model.nv_joint[b] for b in range(root, end))
            inside = [b for b in coupled if root <= b < end]
            if any(not first <= model.v_start[b] < stop for b in inside):  # a master in another tree
                return np.arange(model.nv, dtype=np.int64) - 1
            if inside:
                dof_parent[first:stop] = np.arange(first - 1, stop - 1)
                dof_parent[first] = -1
        return dof_parent

    def _pack(self):
        """What the compiled recursions read, copied into one float and one int
        array (model.packed; a kernel call then unboxes two arrays, not fifteen)
        by their one layout, model_arrays: each field filled by name; and
        both, with the frames' placements (frame_placement), into one int
        array (model.packed_flat, for the per-call paths). All read-only."""
        model = self.model
        dimensions = (model.nbodies, len(model.quaternion_starts), model.nv)
        float_size, int_size = packed_sizes(*dimensions)
        floats, ints = np.empty(float_size), np.empty(int_size, dtype=np.int64)
        views = model_arrays(floats, ints, *dimensions)
        views.header[:] = dimensions
        for name in ModelArrays._fields[1:]:
            getattr(views, name)[...] = np.reshape(getattr(model, name), getattr(views, name).shape)
        floats.setflags(write=False)
        ints.setflags(write=False)
        model.packed = (floats, ints)
        frames = list(model.frames.values())
        flat = np.empty(2 + int_size + float_size + FRAME_FLOATS * len(frames), dtype=np.int64)  # one argument
        flat[:2] = int_size, float_size
        flat[2:2 + int_size] = ints
        flat[2 + int_size:2 + int_size + float_size].view(np.float64)[:] = floats
        placements = flat[2 + int_size + float_size:].view(np.float64).reshape(len(frames), FRAME_FLOATS)
        for k, frame in enumerate(frames):
            placements[k] = (frame.body, *frame.rotation.ravel(), *frame.translation)
        flat.setflags(write=False)
        model.packed_flat = flat
        model.frame_numbers = {frame.name: k for k, frame in enumerate(frames)}  # for frame_placement

    def _armature(self, coupled):
        """model.armature (nv,): the reflected rotor inertia on each coordinate (RNEA,
        CRBA and ABA add it to the joint space's mass matrix diagonal, as Pinocchio's
        model.armature)."""
        model = self.model
        model.armature = np.zeros(model.nv)
        for name, value in self.armature.items():
            joint = self.description.joints.get(name)
            if joint is None or joint.type not in ("revolute", "continuous", "prismatic"):
                raise ValueError(f"armature: model '{model.name}' has no revolute or prismatic joint '{name}'")
            multiplier, master = 1.0, name
            while master in coupled:
                mimic = self.description.joints[master].mimic
                multiplier, master = multiplier * mimic.multiplier, mimic.joint
            model.armature[model.v_index(master)] += multiplier**2 * value

    def _limits(self, by_name):
        """Position limits (nq), velocity and effort limits, and the joint
        friction (nv): viscous (damping), Coulomb (friction), static
        (static_friction, >= friction), the Stribeck velocity and the offset
        (friction_offset) of algorithms.joint_friction."""
        model, joints = self.model, self.description.joints
        model.lower_position_limit = np.full(model.nq, -np.inf)
        model.upper_position_limit = np.full(model.nq, np.inf)
        model.velocity_limit = np.full(model.nv, np.inf)
        model.effort_limit = np.full(model.nv, np.inf)
        model.damping = np.zeros(model.nv)
        model.friction = np.zeros(model.nv)
        model.static_friction = np.zeros(model.nv)
        model.stribeck_velocity = np.full(model.nv, DEFAULT_STRIBECK_VELOCITY)
        model.friction_offset = np.zeros(model.nv)
        for name in model.joint_names:
            if name not in joints:  # root_joint
                continue
            joint, body = joints[name], by_name[name]
            q0, v0 = model.q_start[body], model.v_start[body]
            nv = JOINT_NV[model.joint_type[body]]
            if joint.type in ("revolute", "prismatic"):
                model.lower_position_limit[q0], model.upper_position_limit[q0] = joint.lower, joint.upper
            model.velocity_limit[v0:v0 + nv] = joint.velocity
            model.effort_limit[v0:v0 + nv] = joint.effort
            model.damping[v0:v0 + nv] = joint.damping
            model.friction[v0:v0 + nv] = joint.friction
            model.static_friction[v0:v0 + nv] = joint.friction if joint.static_friction is None \
                else max(joint.static_friction, joint.friction)
            model.stribeck_velocity[v0:v0 + nv] = joint.stribeck_velocity
            model.friction_offset[v0:v0 + nv] = joint.friction_offset


# The model as the compiled kernels read it: model.parent[i], model.mass[i], ...
# (the fields of the module docstring, plus quaternion_starts, gravity,
# armature and inertia_scale (1,)), after the header (nbodies, number of
# quaternions, nv); nq last of the ints (ints[-1]), where appending it moved
# no other field. Built inside the kernels from model.packed by unpack_model:
# a namedtuple of views costs nothing there, while one passed in from Python
# costs a microsecond a call to unbox.
ModelArrays = namedtuple("ModelArrays", (
    "header", "parent", "joint_type", "q_start", "v_start", "coupling", "tree_rotation", "tree_translation", "axis",
    "plane", "mass", "first_moment", "rotational_inertia", "quaternion_starts", "nv_joint", "shared_coordinates",
    "gravity", "armature", "inertia_scale", "nq"))


@njit(cache=True, inline="always")
def model_arrays(floats, ints, n, nquat, nv):
    """The ModelArrays of n bodies, nquat quaternions and nv velocity
    coordinates as views of (floats, ints): the one definition of
    model.packed's layout, by which Model packs and unpack_model reads."""
    return lay_out_model(floats, ints, n, nquat, nv)[0]


@njit(cache=True, inline="always")
def lay_out_model(floats, ints, n, nquat, nv):
    """(ModelArrays, float end, int end) laid out in (floats, ints), the ends
    checked once (workspace.take_unchecked: a kernel pays for the fields it
    reads alone; a check per field cost a Jacobian 25-50 ns a call)."""
    header, o = take_unchecked(ints, 0, (3,))
    parent, o = take_unchecked(ints, o, (n,))
    joint_type, o = take_unchecked(ints, o, (n,))
    q_start, o = take_unchecked(ints, o, (n,))
    v_start, o = take_unchecked(ints, o, (n,))
    quaternion_starts, o = take_unchecked(ints, o, (nquat,))
    nv_joint, o = take_unchecked(ints, o, (n,))
    shared_coordinates, o = take_unchecked(ints, o, (1,))
    nq, int_end = take_unchecked(ints, o, (1,))
    coupling, o = take_unchecked(floats, 0, (n, 2))
    tree_rotation, o = take_unchecked(floats, o, (n, 3, 3))
    tree_translation, o = take_unchecked(floats, o, (n, 3))
    axis, o = take_unchecked(floats, o, (n, 3))
    plane, o = take_unchecked(floats, o, (n, 2, 3))
    mass, o = take_unchecked(floats, o, (n,))
    first_moment, o = take_unchecked(floats, o, (n, 3))
    rotational_inertia, o = take_unchecked(floats, o, (n, 3, 3))
    gravity, o = take_unchecked(floats, o, (3,))
    armature, o = take_unchecked(floats, o, (nv,))
    inertia_scale, float_end = take_unchecked(floats, o, (1,))
    if n < 0 or nquat < 0 or nv < 0 or float_end > floats.shape[0] or int_end > ints.shape[0]:
        raise ValueError("model layout larger than its buffers")
    return ModelArrays(header, parent, joint_type, q_start, v_start, coupling, tree_rotation, tree_translation, axis,
                       plane, mass, first_moment, rotational_inertia, quaternion_starts, nv_joint, shared_coordinates,
                       gravity, armature, inertia_scale, nq), float_end, int_end


@njit(cache=True)
def packed_sizes(n, nquat, nv):
    """(floats, ints): the sizes of model.packed, measured on its layout."""
    _, float_end, int_end = lay_out_model(unbounded(np.empty(1)), unbounded(np.empty(1, dtype=np.int64)), n, nquat,
                                          nv)
    return float_end, int_end


@njit(cache=True, inline="always")
def unpack_model(packed):
    """The model's arrays (ModelArrays), as views of model.packed."""
    floats, ints = packed
    return model_arrays(floats, ints, ints[0], ints[1], ints[2])


@njit(cache=True, inline="always")
def unflatten(flat):
    """model.packed from model.packed_flat (its sizes, then the ints, then the
    floats' bits): views typed as model.packed's arrays, read-only."""
    int_size, float_size = flat[0], flat[1]
    ints, _ = take(flat, 2, (int_size,))
    return readonly(float_view(flat, 2 + int_size, float_size)), readonly(ints)


# A frame's placement in model.packed_flat: [body (-1: the world), rotation in
# the body (9, by rows), origin in the body (3)], after the floats.
FRAME_FLOATS = 13


@njit(cache=True, inline="always")
def frame_count(flat):
    """The number of frames whose placements model.packed_flat carries."""
    return (flat.shape[0] - 2 - flat[0] - flat[1]) // FRAME_FLOATS


@njit(cache=True, inline="always")
def frame_placement(flat, frame):
    """The placement of frame number `frame` (model.frame_numbers; in
    range(frame_count(flat))) in model.packed_flat, FRAME_FLOATS numbers."""
    return float_view(flat, 2 + flat[0] + flat[1] + FRAME_FLOATS * frame, FRAME_FLOATS)


@njit(cache=True, inline="always")
def body_count(packed):
    """The number of bodies of a packed model (the first of its ints)."""
    return packed[1][0]


def _checked_armature(armature) -> dict[str, float]:
    """{joint: value} of finite values >= 0 (Model's armature argument)."""
    if armature is None:
        return {}
    if not isinstance(armature, dict):
        raise ValueError(f"armature must be a dict {{joint: reflected rotor inertia}}, got {type(armature).__name__}")
    checked = {}
    for name, value in armature.items():
        try:
            checked[name] = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"armature of joint '{name}' must be a number, got {value!r}") from None
        if not (np.isfinite(checked[name]) and 0.0 <= checked[name] <= 1e12):
            raise ValueError(f"armature of joint '{name}' must be finite, >= 0 and <= 1e12, got {value!r}")
    return checked


def plane_basis(axis: np.ndarray) -> np.ndarray:
    """In-plane unit vectors (u1, u2) with u1 x u2 = axis; x and y for the z axis."""
    axis = axis / np.linalg.norm(axis)
    helper = np.array([1.0, 0.0, 0.0]) if abs(axis[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    first = helper - (helper @ axis) * axis
    first /= np.linalg.norm(first)
    return np.array([first, np.cross(axis, first)])
