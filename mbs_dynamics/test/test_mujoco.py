"""MuJoCo as a second, independent oracle (test-only): the mass matrix, the
bias forces C v + g and the inverse dynamics of real robots, fixed and
floating base, loaded by MuJoCo's own URDF importer.

Conversions: joints are matched by name; MuJoCo's free joint has
qpos = [p; qw qx qy qz] and qvel = [dp/dt (world); w (body)], ours
v = [w_b; v_b] with v_b = R^T dp/dt, so qvel_mj = T v with the base block
T = [[0, R], [1, 0]]; then M = T^T M_mj T and, as dT/dt v = [R (w_b x v_b); 0],
tau = T^T (M_mj (T a + dT/dt v) + b_mj).
"""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest

from helpers import close
from oracles import mujoco_spec, random_state, robot_path

mujoco = pytest.importorskip("mujoco")

# MuJoCo refuses the inertias of TIAGo, iCub, ANYmal (a negative eigenvalue) and
# PR2, Romeo (triangle inequality) that we load with a warning (DESIGN.md §3).
ROBOTS = {"ur5": False, "panda": False, "solo12": True, "talos": True, "talos_full": True}


class MujocoPair:
    def __init__(self, name: str, floating_base: bool):
        path = robot_path(name)
        self.model = mbs.Model.from_urdf_file(path, floating_base=floating_base, mimic="independent")
        spec = mujoco_spec(path)
        if floating_base:
            spec.worldbody.first_body().add_freejoint()
        self.mj = spec.compile()
        self.data = mujoco.MjData(self.mj)
        self.floating_base = floating_base

    def state(self, q, v, a):
        """MuJoCo's qpos, qvel and qacc of our (q, v, a), and T (qvel_mj = T v)."""
        m, mj = self.model, self.mj
        qpos, T = np.zeros(mj.nq), np.zeros((mj.nv, m.nv))
        for name in m.joint_names:
            qi, vi = m.q_index(name), m.v_index(name)
            if name == "root_joint":
                x, y, z, w = q[qi + 3:qi + 7]
                qpos[0:3], qpos[3:7] = q[qi:qi + 3], (w, x, y, z)
                R = mbs.lie.quaternion_to_matrix(x, y, z, w)
                T[0:3, vi + 3:vi + 6] = R
                T[3:6, vi:vi + 3] = np.eye(3)
            else:
                joint = mj.joint(name)
                qpos[joint.qposadr[0]] = q[qi]
                T[joint.dofadr[0], vi] = 1.0
        dT_v = np.zeros(mj.nv)
        if self.floating_base:
            base = m.v_index("root_joint")
            dT_v[0:3] = T[0:3, base + 3:base + 6] @ np.cross(v[base:base + 3], v[base + 3:base + 6])
        return qpos, T @ v, T @ a + dT_v, T

    def dynamics(self, q, v, a):
        """(M, C v + g, M a + C v + g) in our coordinates, from MuJoCo."""
        qpos, qvel, qacc, T = self.state(q, v, a)
        d = self.data
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(self.mj, d)  # positions, velocities, M and the bias (it overwrites qacc)
        M = np.zeros((self.mj.nv, self.mj.nv))
        mujoco.mj_fullM(self.mj, d, M)
        d.qacc[:] = qacc
        tau = np.zeros(self.mj.nv)
        mujoco.mj_rne(self.mj, d, 1, tau)
        # at v = 0 the bias is gravity; dT/dt v enters only through M_mj dT/dt v
        _, _, qacc_bias, _ = self.state(q, v, np.zeros_like(a))
        bias = T.T @ (d.qfrc_bias + M @ qacc_bias)
        return T.T @ M @ T, bias, T.T @ tau


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_dynamics_match_mujoco(name):
    pair = MujocoPair(name, ROBOTS[name])
    model = pair.model
    rng = np.random.default_rng(21)
    for _ in range(3):
        q, v, a = random_state(model, rng)
        M, bias, tau = pair.dynamics(q, v, a)
        close(mbs.mass_matrix(model, q), M)
        close(mbs.nonlinear_effects(model, q, v), bias)
        close(mbs.inverse_dynamics(model, q, v, a), tau)
        close(mbs.gravity_torques(model, q), pair.dynamics(q, 0 * v, 0 * a)[1])
