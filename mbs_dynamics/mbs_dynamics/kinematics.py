"""Forward kinematics: poses of every body and frame (Müller kinematics §2-3,
RBDL §6): ^0T_i = ^0T_λ(i) ^λT_i."""
import numpy as np
from numba import njit

from mbs_dynamics import inputs
from mbs_dynamics.joints import forward_pass
from mbs_dynamics.model import Model
from mbs_dynamics.spatial import motion_to_parent


@njit(cache=True)
def body_poses_kernel(arrays, q, R, p, S, nv_joint, RJ, world_R, world_p):
    """World <- body for every body (world_R, world_p), from the parent placements."""
    forward_pass(arrays, q, R, p, S, nv_joint, RJ)
    parent = arrays[0]
    for i in range(parent.shape[0]):
        lam = parent[i]
        if lam < 0:
            world_R[i] = R[i]
            world_p[i] = p[i]
            continue
        for r in range(3):
            for c in range(3):
                world_R[i, r, c] = (world_R[lam, r, 0] * R[i, 0, c] + world_R[lam, r, 1] * R[i, 1, c]
                                    + world_R[lam, r, 2] * R[i, 2, c])
            world_p[i, r] = world_p[lam, r] + (world_R[lam, r, 0] * p[i, 0] + world_R[lam, r, 1] * p[i, 1]
                                               + world_R[lam, r, 2] * p[i, 2])


class Workspace:
    """Scratch arrays of the recursions, one set per model, workspace type and
    thread (the model itself stays constant). Get one with `of(model)`."""

    @classmethod
    def of(cls, model: Model):
        scratch = model.scratch
        workspace = getattr(scratch, cls.__name__, None)
        if workspace is None:
            workspace = cls(model)
            setattr(scratch, cls.__name__, workspace)
        return workspace

    def __init__(self, model: Model):
        n = model.nbodies
        self.R = np.empty((n, 3, 3))
        self.p = np.empty((n, 3))
        self.S = np.empty((n, 6, 6))
        self.nv_joint = np.empty(n, dtype=np.int64)
        self.RJ = np.empty((3, 3))
        self.world_R = np.empty((n, 3, 3))
        self.world_p = np.empty((n, 3))


def body_poses(model: Model, q) -> tuple[np.ndarray, np.ndarray]:
    """World <- body rotation (nbodies, 3, 3) and translation (nbodies, 3) at q."""
    q = inputs.configuration(model, q, batch=False)
    w = Workspace.of(model)
    body_poses_kernel(model.arrays, q, w.R, w.p, w.S, w.nv_joint, w.RJ, w.world_R, w.world_p)
    return w.world_R.copy(), w.world_p.copy()


def frame_pose(model: Model, q, frame: str) -> np.ndarray:
    """4x4 homogeneous transform world <- frame at q."""
    placement = model.frame(frame)
    q = inputs.configuration(model, q, batch=False)
    pose = np.eye(4)
    if placement.body < 0:
        pose[:3, :3], pose[:3, 3] = placement.rotation, placement.translation
        return pose
    world_R, world_p = body_poses(model, q)
    R, p = world_R[placement.body], world_p[placement.body]
    pose[:3, :3] = R @ placement.rotation
    pose[:3, 3] = R @ placement.translation + p
    return pose


REPRESENTATIONS = ("body", "spatial", "hybrid", "mixed")


@njit(cache=True)
def spatial_jacobian_kernel(arrays, q, body, J, R, p, S, nv_joint, RJ, world_R, world_p, column):
    """J (6, nv): the spatial Jacobian of `body`, columns ^0X_j S_j for the joints j
    that support it (RBDL §6.2), world axes, velocity of the point at the world origin."""
    parent, v_start = arrays[0], arrays[3]
    body_poses_kernel(arrays, q, R, p, S, nv_joint, RJ, world_R, world_p)
    for r in range(6):
        for c in range(J.shape[1]):
            J[r, c] = 0.0
    j = body
    while j >= 0:
        for k in range(nv_joint[j]):
            motion_to_parent(world_R[j], world_p[j], S[j, :, k], column)
            for r in range(6):
                J[r, v_start[j] + k] += column[r]
        j = parent[j]


def frame_jacobian(model: Model, q, frame: str, representation: str = "body") -> np.ndarray:
    """(6, nv) map from v to the frame's twist [w; v] (Müller kinematics §3):

    body     [w_b; v_b]  frame axes, velocity of the frame origin
    spatial  [w; v_s]    world axes, velocity of the body point at the world origin
    hybrid   [w; dr/dt]  world axes, velocity of the frame origin
    mixed    [w_b; dr/dt] angular in frame axes, linear = velocity of the frame origin in world axes
    """
    if representation not in REPRESENTATIONS:
        raise ValueError(f"representation must be one of {', '.join(REPRESENTATIONS)}, got {representation!r}")
    placement = model.frame(frame)
    q = inputs.configuration(model, q, batch=False)
    J = np.zeros((6, model.nv))
    if placement.body < 0:
        return J
    w = Workspace.of(model)
    spatial_jacobian_kernel(model.arrays, q, placement.body, J, w.R, w.p, w.S, w.nv_joint, w.RJ,
                            w.world_R, w.world_p, np.empty(6))
    if representation == "spatial":
        return J
    R_body, p_body = w.world_R[placement.body], w.world_p[placement.body]
    R_frame = R_body @ placement.rotation
    origin = R_body @ placement.translation + p_body
    J[3:] += np.cross(J[:3].T, origin).T  # velocity of the frame origin: v_s + w x r
    if representation == "hybrid":
        return J
    J[:3] = R_frame.T @ J[:3]
    if representation == "body":
        J[3:] = R_frame.T @ J[3:]
    return J
