"""Forward kinematics: poses of every body and frame (Müller kinematics §2-3,
RBDL §6): ^0T_i = ^0T_λ(i) ^λT_i."""
import numpy as np
from numba import njit

from mbs_dynamics import inputs
from mbs_dynamics.joints import forward_pass
from mbs_dynamics.model import Model


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
    """Per-call scratch arrays of the recursions (the model stays constant)."""

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
    w = Workspace(model)
    body_poses_kernel(model.arrays, q, w.R, w.p, w.S, w.nv_joint, w.RJ, w.world_R, w.world_p)
    return w.world_R, w.world_p


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
