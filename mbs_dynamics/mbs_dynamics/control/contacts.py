"""Contacts of the whole-body controller (DESIGN.md §9), TSID's two kinds:

* `RigidPointContact` (TSID's ContactPoint in world-aligned axes): a point
  foot. Force f (3) in world axes; the constraint holds the frame origin's
  classical acceleration at Kp (p_ref - p) - Kd ṗ; the linearised friction
  pyramid (4 facets) and min <= n·f <= max. With a radius, the frame is a
  sphere foot's centre and the point its lowest, rolling without slip.
* `RigidSurfaceContact` (TSID's Contact6d): a sole welded to the ground,
  carried by four corner forces in the sole's own axes (12 variables), each
  in its pyramid, their total normal force within bounds; the constraint
  holds the sole's local acceleration [ω̇; p̈] at Kp e - Kd V_local (e =
  [log(Rᵀ R_ref); Rᵀ(p_ref - p)]). Its wrench [n; f] about the frame origin is
  reported in world axes.

Both are named by a frame of the URDF; the reference pose is the frame's
pose at the first cycle after the contact was added, unless set. Each
carries TSID's force regularisation: weight × ||W (F - F_ref)||², W the
per-axis weights ([1, 1, 1e-3] on a point's force; on a sole's local wrench
[2, 2, 2] on the moment and [1, 1, 1e-3] on the force)."""
from __future__ import annotations

import numpy as np

from mbs_dynamics.control.tasks import Versioned, finite_vector, gains, rotation_matrix, weight
from mbs_dynamics.spatial.lie import skew, so3_log


def pyramid(normal, friction: float, corners: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B, lower, upper): rows B F in [lower, upper] for `corners` forces of 3
    along the normal n: the four facets (±t - μ n)·f <= 0 of each (t1 = n × x̂,
    or n × ŷ where that is short, t2 = n × t1, as TSID builds them), and the
    total normal force n·Σf (last row; bounds set by the caller)."""
    n = np.asarray(normal, dtype=float)
    t1 = np.cross(n, [1.0, 0.0, 0.0])
    if np.linalg.norm(t1) < 1e-5:
        t1 = np.cross(n, [0.0, 1.0, 0.0])
    t2 = np.cross(n, t1)
    t1, t2 = t1 / np.linalg.norm(t1), t2 / np.linalg.norm(t2)
    facets = np.array([-t1 - friction * n, t1 - friction * n, -t2 - friction * n, t2 - friction * n])
    rows = 4 * corners + 1
    B = np.zeros((rows, 3 * corners))
    for c in range(corners):
        B[4 * c:4 * c + 4, 3 * c:3 * c + 3] = facets
        B[-1, 3 * c:3 * c + 3] = n
    lower, upper = np.full(rows, -1e10), np.zeros(rows)
    return B, lower, upper


class RigidContact(Versioned):
    """What both kinds share: the frame, friction, normal force bounds, gains
    and the force regularisation."""

    size = 0  # force variables
    kind = "contact"

    def __init__(self, frame: str, friction: float, normal, min_normal_force: float, max_normal_force: float,
                 kp, kd, regularization_weight: float, regularization_axes):
        self.frame = frame
        self.name = frame
        mu = finite_vector(friction, 1, f"the friction coefficient of contact '{frame}'")[0]
        if mu <= 0:
            raise ValueError(f"the friction coefficient of contact '{frame}' must be positive, got {mu}")
        self.friction = float(mu)
        n = finite_vector(normal, 3, f"the normal of contact '{frame}'")
        if np.linalg.norm(n) < 1e-9:
            raise ValueError(f"the normal of contact '{frame}' must not be zero")
        self.normal = n / np.linalg.norm(n)
        self.min_normal_force = float(finite_vector(min_normal_force, 1,
                                                    f"the minimum normal force of contact '{frame}'")[0])
        upper = float(max_normal_force)
        if np.isnan(upper) or upper < self.min_normal_force:
            raise ValueError(f"the maximum normal force of contact '{frame}' ({max_normal_force}) must be at "
                             f"least its minimum ({self.min_normal_force})")
        self.max_normal_force = upper
        self.kp = float(gains(kp, 1, f"the kp of contact '{frame}'")[0])
        self.kd = float(gains(kd, 1, f"the kd of contact '{frame}'")[0])
        self.regularization_weight = weight(regularization_weight, f"the force regularisation weight of '{frame}'")
        self.rotation = self.position = None  # the frame's pose at the first cycle, unless set
        self.B, self.lower, self.upper = self.force_inequalities()

    def force_inequalities(self):
        B, lower, upper = pyramid(self.normal, self.friction, self.size // 3)
        lower[-1], upper[-1] = self.min_normal_force, min(self.max_normal_force, 1e10)
        return B, lower, upper

    def set_reference(self, pose=None, *, position=None, rotation=None) -> None:
        """The pose the contact holds (4x4 world <- frame, or position and rotation)."""
        if pose is not None:
            T = finite_vector(np.asarray(pose, dtype=float).ravel(), 16, f"the reference pose of contact "
                                                                           f"'{self.frame}'").reshape(4, 4)
            rotation, position = T[:3, :3], T[:3, 3]
        if rotation is not None:
            self.rotation = rotation_matrix(rotation, f"the reference rotation of contact '{self.frame}'")
        if position is not None:
            self.position = finite_vector(position, 3, f"the reference position of contact '{self.frame}'")

    def set_force_reference(self, reference) -> None:
        """F_ref of the regularisation: a point's force (3), a surface's local
        wrench [n; f] (6), in the axes the regularisation weighs."""
        size = 3 if self.kind == "point" else 6
        self.force_reference = finite_vector(reference, size, f"the force reference of contact '{self.frame}'")
        self.regularization_target = self.regularization_axes * self.force_reference

    def capture(self, R, p) -> None:
        if self.rotation is None:
            self.rotation = R.copy()
        if self.position is None:
            self.position = p.copy()


class RigidPointContact(RigidContact):
    """A point foot: force (3,) in world axes, normal in world axes.

    radius r > 0: the frame is the centre of a sphere foot rolling on the
    ground, and the contact point the sphere's lowest point p - r n (not a
    point fixed in the foot: the one that touched first rises as the sphere
    turns). It is held by no slip and no normal motion, ṗ + ω × o = 0 with
    o = -r n fixed in the world, whose rate is p̈ + ω̇ × o: the rows J_lin -
    [o]× J_ang, the drift p̈₀ + ω̇₀ × o. What the simulator's sphere contact
    does (a rolling sphere's centre moves by r times its turn, so a radius-0
    contact at the centre is wrong by that). The reference position is the
    contact point's."""

    size = 3
    motion_rows = 3
    kind = "point"

    def __init__(self, frame: str, friction: float = 0.5, normal=(0.0, 0.0, 1.0), min_normal_force=0.0,
                 max_normal_force=np.inf, kp=0.0, kd=0.0, regularization_weight=1e-5,
                 regularization_axes=(1.0, 1.0, 1e-3), radius=0.0):
        super().__init__(frame, friction, normal, min_normal_force, max_normal_force, kp, kd,
                         regularization_weight, regularization_axes)
        axes = finite_vector(regularization_axes, 3, f"the regularisation axes of contact '{frame}'")
        self.regularization_axes = axes
        self.regularization = np.diag(axes)  # on f
        self.radius = float(gains(radius, 1, f"the radius of contact '{frame}'")[0])
        self.set_force_reference(np.zeros(3))

    @property
    def offset(self) -> np.ndarray:
        """The contact point from the frame origin, world axes (-r n)."""
        return -self.radius * self.normal

    def rows(self, state):
        """(J (3, nv) world axes, rhs of J a = rhs) of the contact point."""
        k = state.frame_index[self.frame]
        J, twist, drift = state.frame_jacobian[k], state.frame_twist[k], state.frame_drift[k]
        point, J_point, velocity, drift_point = state.frame_position[k], J[3:], twist[3:], drift[3:]
        if self.radius:
            o = self.offset
            point = point + o
            J_point = J_point - skew(o) @ J[:3]
            velocity = velocity + np.cross(twist[:3], o)
            drift_point = drift_point + np.cross(drift[:3], o)
        self.capture(state.frame_rotation[k], point)
        desired = self.kp * (self.position - point) - self.kd * velocity
        return J_point, desired - drift_point

    def generator(self, state):
        return np.eye(3)

    def wrench(self, force, state) -> np.ndarray:
        return force.copy()


class RigidSurfaceContact(RigidContact):
    """A sole: four corner forces in the frame's axes; `corners` (4, 3) in the
    frame, `normal` in the frame's axes (default its z axis)."""

    size = 12
    motion_rows = 6
    kind = "surface"

    def __init__(self, frame: str, corners, friction: float = 0.5, normal=(0.0, 0.0, 1.0), min_normal_force=0.0,
                 max_normal_force=np.inf, kp=0.0, kd=0.0, regularization_weight=1e-5,
                 regularization_axes=(2.0, 2.0, 2.0, 1.0, 1.0, 1e-3)):
        corners = finite_vector(np.asarray(corners, dtype=float).ravel(), 12,
                                f"the corners of contact '{frame}'").reshape(4, 3)
        self.corners = corners
        super().__init__(frame, friction, normal, min_normal_force, max_normal_force, kp, kd,
                         regularization_weight, regularization_axes)
        # the local wrench [n; f] about the frame origin of the corner forces
        self.local_generator = np.zeros((6, 12))
        for c in range(4):
            self.local_generator[:3, 3 * c:3 * c + 3] = skew(corners[c])
            self.local_generator[3:, 3 * c:3 * c + 3] = np.eye(3)
        axes = finite_vector(regularization_axes, 6, f"the regularisation axes of contact '{frame}'")
        self.regularization_axes = axes
        self.regularization = np.diag(axes) @ self.local_generator  # on the local wrench
        self.set_force_reference(np.zeros(6))

    def rows(self, state):
        """(J_local (6, nv) [ω; ṗ] in frame axes, rhs)."""
        k = state.frame_index[self.frame]
        R, p = state.frame_rotation[k], state.frame_position[k]
        J, twist, drift = state.frame_jacobian[k], state.frame_twist[k], state.frame_drift[k]
        self.capture(R, p)
        Rt = R.T
        error = np.concatenate((so3_log(Rt @ self.rotation), Rt @ (self.position - p)))
        velocity = np.concatenate((Rt @ twist[:3], Rt @ twist[3:]))
        desired = self.kp * error - self.kd * velocity
        return np.vstack((Rt @ J[:3], Rt @ J[3:])), desired - np.concatenate((Rt @ drift[:3], Rt @ drift[3:]))

    def generator(self, state):
        return self.local_generator

    def wrench(self, force, state) -> np.ndarray:
        """[n; f] about the frame origin, world axes."""
        R = state.frame_rotation[state.frame_index[self.frame]]
        local = self.local_generator @ force
        return np.concatenate((R @ local[:3], R @ local[3:]))
