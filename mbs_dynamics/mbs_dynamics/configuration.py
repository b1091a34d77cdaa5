"""The configuration space: q ⊕ v and q1 ⊖ q0 (Müller dynamics §7, kinematics
App. A). Revolute, prismatic and planar coordinates add (their v is dq/dt);
a floating joint moves by the SE(3) exponential of its body twist,
T ← T exp(v dt), its quaternion renormalised so that it stays unit."""
import numpy as np

from mbs_dynamics import inputs
from mbs_dynamics.lie import matrix_to_quaternion, quaternion_to_matrix, so3_exp, so3_left_jacobian, so3_log
from mbs_dynamics.model import FLOATING, JOINT_NV, Model


def integrate(model: Model, q, v, dt: float = 1.0) -> np.ndarray:
    """q ⊕ v dt: the configuration reached from q moving at v for dt."""
    q = inputs.configuration(model, q, batch=False)
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    if not np.isfinite(dt):
        raise ValueError(f"dt must be finite, got {dt}")
    out = q.copy()
    for body in range(model.nbodies):
        q0, v0 = model.q_start[body], model.v_start[body]
        if model.body_joint_names[body] in model._coupled:
            continue
        if model.joint_type[body] == FLOATING:
            quaternion = q[q0 + 3:q0 + 7] / np.linalg.norm(q[q0 + 3:q0 + 7])
            R = quaternion_to_matrix(*quaternion)
            w, u = v[v0:v0 + 3] * dt, v[v0 + 3:v0 + 6] * dt
            out[q0:q0 + 3] = q[q0:q0 + 3] + R @ (so3_left_jacobian(w) @ u)
            out[q0 + 3:q0 + 7] = matrix_to_quaternion(R @ so3_exp(w))
        else:
            n = JOINT_NV[model.joint_type[body]]
            out[q0:q0 + n] = q[q0:q0 + n] + v[v0:v0 + n] * dt
    return out


def difference(model: Model, q0, q1) -> np.ndarray:
    """v with integrate(q0, v, 1) = q1 (the log of the floating joints' relative pose)."""
    q0 = inputs.configuration(model, q0, batch=False)
    q1 = inputs.configuration(model, q1, batch=False)
    v = np.zeros(model.nv)
    for body in range(model.nbodies):
        qs, vs = model.q_start[body], model.v_start[body]
        if model.body_joint_names[body] in model._coupled:
            continue
        if model.joint_type[body] == FLOATING:
            R0 = quaternion_to_matrix(*(q0[qs + 3:qs + 7] / np.linalg.norm(q0[qs + 3:qs + 7])))
            R1 = quaternion_to_matrix(*(q1[qs + 3:qs + 7] / np.linalg.norm(q1[qs + 3:qs + 7])))
            w = so3_log(R0.T @ R1)
            v[vs:vs + 3] = w
            v[vs + 3:vs + 6] = np.linalg.solve(so3_left_jacobian(w), R0.T @ (q1[qs:qs + 3] - q0[qs:qs + 3]))
        else:
            n = JOINT_NV[model.joint_type[body]]
            v[vs:vs + n] = q1[qs:qs + n] - q0[qs:qs + n]
    return v

