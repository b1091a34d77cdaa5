"""The actuators of a step, one ACTUATOR record (records.py) per velocity
coordinate: a commanded effort, and PD gains toward targets applied
implicitly (stepping's docstring), clamped at the effort limit; and the
joints' own terms, one JOINT_TERMS record per coordinate (viscous damping;
Coulomb, static friction and Stribeck velocity; the friction offset: a
constant torque against the effort) and one LIMIT record per coordinate
with a position limit, from the URDF."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

from mbs_dynamics.multibody.model import Model
from mbs_dynamics.simulation.stepping.records import ACTUATOR, JOINT_TERMS, LIMIT, copy_records, new_record


@lru_cache(maxsize=32)
def _no_gains(model: Model) -> np.ndarray:
    return new_record(ACTUATOR, model.nv, limit=model.effort_limit, target_q=-1)


def effort_actuation(model: Model, tau: np.ndarray) -> np.ndarray:
    """The ACTUATOR records of efforts tau alone (no gains; the limits, unused, the model's)."""
    actuation = copy_records(_no_gains(model))
    actuation["effort"] = tau
    return actuation


@lru_cache(maxsize=32)
def position_limits(model: Model) -> np.ndarray:
    """The LIMIT records of the one-coordinate joints with a finite position
    limit (URDF revolute and prismatic joints). Read-only: cached."""
    rows = []
    for body, name in enumerate(model.body_joint_names):
        if name not in model.joint_names or model.nv_joint[body] != 1:
            continue  # a fixed joint, a mimic joint following its master, a floating or planar joint
        qi, vi = int(model.q_start[body]), int(model.v_start[body])
        lower, upper = model.lower_position_limit[qi], model.upper_position_limit[qi]
        if np.isfinite(lower) or np.isfinite(upper):
            rows.append((qi, vi, lower, upper))
    limits = np.array(rows, dtype=LIMIT).reshape(len(rows))
    limits.setflags(write=False)
    return limits


_NO_LIMITS = np.zeros(0, dtype=LIMIT)
_NO_LIMITS.setflags(write=False)


@lru_cache(maxsize=32)
def joint_terms(model: Model, limits: bool, damping: bool, friction: bool) -> tuple[np.ndarray, np.ndarray]:
    """(JOINT_TERMS records (nv,), LIMIT records) of the joints' URDF damping,
    friction (with friction: the Coulomb and static friction, the Stribeck
    velocity and the offset) and position limits, each zero or none where
    off. Read-only: they are cached, and shared by every step of the model."""
    terms = new_record(JOINT_TERMS, model.nv, damping=model.damping if damping else 0.0,
                       friction=model.friction if friction else 0.0,
                       static=model.static_friction if friction else 0.0,
                       stribeck_velocity=model.stribeck_velocity,
                       offset=model.friction_offset if friction else 0.0)
    terms.setflags(write=False)
    return terms, position_limits(model) if limits else _NO_LIMITS


@njit(cache=True, inline="always")
def has_gains(actuation):
    for r in range(actuation.shape[0]):
        if actuation[r].stiffness > 0.0 or actuation[r].damping > 0.0:
            return True
    return False


@njit(cache=True, inline="always")
def actuated_terms(actuation, terms, q, work, dt):
    """work.effort and work.damping: the commanded effort with the PD terms
    K (q* - q) + B v*, less the joint's friction offset, and the joint
    damping with B + dt K (stepping's docstring); an actuator clamped
    (work.clamp = ±1) applies its limit instead."""
    for r in range(work.effort.shape[0]):
        actuator = actuation[r]
        stiffness, damping = actuator.stiffness, actuator.damping
        if work.clamp[r] != 0.0:
            work.effort[r] = work.clamp[r] * actuator.limit - terms[r].offset
            work.damping[r] = terms[r].damping
            continue
        effort = actuator.effort + damping * actuator.velocity_target
        if actuator.target_q >= 0:
            effort += stiffness * (actuator.position_target - q[actuator.target_q])
        work.effort[r] = effort - terms[r].offset
        work.damping[r] = terms[r].damping + damping + dt * stiffness


@njit(cache=True, inline="always")
def newly_clamped(actuation, q, v_next, work, dt, coordinates):
    """Each actuator's effort at v⁺ = v_next (COORDINATE records' applied);
    the unclamped ones that pass their limit are clamped (work.clamp).
    Returns whether any was."""
    more = False
    for r in range(coordinates.shape[0]):
        actuator = actuation[r]
        stiffness, damping = actuator.stiffness, actuator.damping
        if work.clamp[r] != 0.0:
            coordinates[r].applied = work.clamp[r] * actuator.limit
            continue
        if stiffness == 0.0 and damping == 0.0:
            coordinates[r].applied = actuator.effort
            continue
        effort = actuator.effort + damping * (actuator.velocity_target - v_next[r])
        if actuator.target_q >= 0:
            effort += stiffness * (actuator.position_target - q[actuator.target_q] - dt * v_next[r])
        coordinates[r].applied = effort
        if abs(effort) > actuator.limit:
            work.clamp[r] = 1.0 if effort > 0.0 else -1.0
            coordinates[r].applied = work.clamp[r] * actuator.limit
            more = True
    return more
