"""Pinocchio as a test-only oracle: the same robot loaded by both, and the
conversions between the conventions (joint order by name, angular-first
spatial vectors, continuous joints as one angle instead of cos/sin)."""
from __future__ import annotations

import importlib.metadata

import mbs_dynamics as mbs
import numpy as np
import pytest

ROBOTS_DIR = importlib.metadata.distribution("example-robot-data").locate_file(
    "cmeel.prefix/share/example-robot-data/robots"
)

REAL_ROBOTS = {
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "panda": "panda_description/urdf/panda.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "anymal": "anymal_b_simple_description/robots/anymal.urdf",
    "talos": "talos_data/robots/talos_reduced.urdf",
    "talos_full": "talos_data/robots/talos_full_v2.urdf",
    "tiago": "tiago_description/robots/tiago.urdf",
    "icub": "icub_description/robots/icub.urdf",
    "romeo": "romeo_description/urdf/romeo_small.urdf",
    "pr2": "pr2_description/urdf/pr2.urdf",
    "tiago_dual": "tiago_description/robots/tiago_dual.urdf",
}


def robot_path(name: str) -> str:
    return str(ROBOTS_DIR / REAL_ROBOTS[name])


def random_state(model, rng):
    """q (joints uniform within their limits, clipped to [-pi, pi]; floating
    joints at a random pose), v and a normal."""
    q = model.neutral_configuration()
    for body, name in enumerate(model.body_joint_names):
        if name not in model.joint_names:
            continue  # a coupled mimic joint
        qi = model.q_index(name)
        if model.joint_type[body] == mbs.multibody.model.FLOATING:
            q[qi:qi + 3] = rng.uniform(-1, 1, 3)
            quaternion = rng.normal(size=4)
            q[qi + 3:qi + 7] = quaternion / np.linalg.norm(quaternion)
        else:
            lower, upper = model.lower_position_limit[qi], model.upper_position_limit[qi]
            q[qi] = rng.uniform(max(lower, -np.pi), min(upper, np.pi))
    return q, rng.normal(size=model.nv), rng.normal(size=model.nv)


class Pair:
    """Our model and Pinocchio's of the same URDF, with conversions."""

    def __init__(self, path: str, floating_base: bool = False, mimic: str = "independent"):
        pin = pytest.importorskip("pinocchio")
        self.pin = pin
        self.model = mbs.Model.from_urdf_file(path, floating_base=floating_base, mimic=mimic)
        kwargs = {"mimic": True} if mimic == "coupled" else {}
        if floating_base:
            self.pin_model = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer(), **kwargs)
        else:
            self.pin_model = pin.buildModelFromUrdf(path, **kwargs)
        self.data = self.pin_model.createData()
        m, pm = self.model, self.pin_model
        # ours = P @ pinocchio for velocity-like vectors (and P @ M_pin @ P.T for matrices)
        self.P = np.zeros((m.nv, pm.nv))
        self.joints = []
        for name in m.joint_names:
            joint = pm.joints[pm.getJointId(name)]
            qi, vi = m.q_index(name), m.v_index(name)
            self.joints.append((qi, vi, joint.idx_q, joint.nq, joint.idx_v, joint.nv))
            if joint.nv == 6:  # free flyer: Pinocchio is [linear; angular]
                for k in range(3):
                    self.P[vi + k, joint.idx_v + 3 + k] = 1.0
                    self.P[vi + 3 + k, joint.idx_v + k] = 1.0
            else:
                for k in range(joint.nv):
                    self.P[vi + k, joint.idx_v + k] = 1.0
        assert np.allclose(self.P @ self.P.T, np.eye(m.nv)), "joint sets differ"

    def random_state(self, rng):
        return random_state(self.model, rng)

    def q(self, q):
        qp = self.pin.neutral(self.pin_model)
        for qi, _, pq, pnq, _, pnv in self.joints:
            if pnq == 2 and pnv == 1:  # continuous: (cos, sin)
                qp[pq:pq + 2] = np.cos(q[qi]), np.sin(q[qi])
            else:
                qp[pq:pq + pnq] = q[qi:qi + pnq]
        return qp

    def v(self, v):
        return self.P.T @ v

    def rnea(self, q, v, a, fext=None):
        if fext is None:
            return self.P @ self.pin.rnea(self.pin_model, self.data, self.q(q), self.v(v), self.v(a))
        return self.P @ self.pin.rnea(self.pin_model, self.data, self.q(q), self.v(v), self.v(a), fext)

    def frame_pose(self, q, frame):
        pin, pm = self.pin, self.pin_model
        pin.framesForwardKinematics(pm, self.data, self.q(q))
        return self.data.oMf[pm.getFrameId(frame)].homogeneous


def mujoco_spec(path: str):
    """MuJoCo's own import of a URDF as an MjSpec (mujoco imported here: only the
    tests and benchmarks that use it need it), without the visual and collision
    geometry (meshes do not matter, and MuJoCo would look for them), inertias
    as written."""
    import xml.etree.ElementTree as ET

    import mujoco

    root = ET.parse(path).getroot()
    for link in root.iter("link"):
        for element in link.findall("visual") + link.findall("collision"):
            link.remove(element)
    extension = ET.SubElement(root, "mujoco")
    ET.SubElement(extension, "compiler", {"discardvisual": "true", "fusestatic": "false",
                                          "balanceinertia": "false", "inertiafromgeom": "false"})
    return mujoco.MjSpec.from_string(ET.tostring(root, encoding="unicode"))
