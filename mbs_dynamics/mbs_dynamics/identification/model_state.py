"""A Recording in a model's coordinates (DESIGN.md §2): `model_state`
gives q, v, a and effort with joints matched by name and the floating base
from the recording's base fields."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbs_dynamics.identification.recording import DataError, Recording
from mbs_dynamics.multibody.configuration import floating_base_state
from mbs_dynamics.multibody.model import JOINT_NQ, ROOT_JOINT, Model


@dataclass(frozen=True, eq=False)
class ModelState:
    """A recording in a model's coordinates (DESIGN.md §2): q (N, nq), v, a
    and effort (N, nv), each None when the recording lacks it (q never is);
    a floating base's effort rows are zero (nothing actuates it). Unpacks as
    q, v, a, effort; `warnings` says what of the recording was ignored."""

    q: np.ndarray
    v: np.ndarray | None
    a: np.ndarray | None
    effort: np.ndarray | None
    warnings: tuple = ()

    def __iter__(self):
        return iter((self.q, self.v, self.a, self.effort))


def model_state(model: Model, recording: Recording, held=None) -> ModelState:
    """The recording's samples as the model's q, v, a and effort, joints
    matched by name (model.q_index, model.v_index); the floating base
    (root_joint) from the recording's base fields; the joints `held`
    ({joint: position}) at that position, at rest, whether recorded or not.
    DataError when the recording lacks positions, a joint of the model (not
    held) or the base of a floating-base model; joints the model does not
    know are ignored with a warning, mimic joints (no coordinates), the
    base of a fixed-base model and held joints' recorded motion likewise."""
    held = held or {}
    joints = [name for name in model.joint_names if (name != ROOT_JOINT or not model.floating_base)
              and name not in held]
    _check_one_coordinate(model, joints)
    missing = [name for name in joints if name not in recording.joint_names]
    if missing:
        raise DataError(f"{recording._what()} lacks joints {missing} of model '{model.name}'; it has "
                        f"{list(recording.joint_names)}. Joints that did not move (a gripper's fingers) can be "
                        f"held at a position: --fixed-joints {','.join(missing)} (at 0, or JOINT=POSITION; "
                        "held_joints in Python)")
    if recording.position is None:
        raise DataError(f"{recording._what()} has no joint positions")
    if model.floating_base and not recording.has_base:
        raise DataError(f"model '{model.name}' has a floating base, {recording._what()} none (read the bag with "
                        "its odometry_topic, or give the CSV the base/... columns)")
    notes = _ignored(model, recording)
    recorded_held = [name for name in held if name in recording.joint_names]
    if recorded_held:
        notes.append(f"the recorded motion of held joints was ignored: {recorded_held}")
    columns = [recording.joint_names.index(name) for name in joints]
    q_index = [model.q_index(name) for name in joints]
    v_index = [model.v_index(name) for name in joints]
    q = np.tile(model.neutral_configuration(), (len(recording), 1))
    q[:, q_index] = recording.position[:, columns]
    for name, position in held.items():
        q[:, model.q_index(name)] = position
    base_velocity = base_acceleration = None
    if model.floating_base:
        q_base, base_velocity = floating_base_state(recording.base_position, recording.base_orientation,
                                                    recording.base_linear_velocity, recording.base_angular_velocity)
        q[:, model.q_index(ROOT_JOINT) + np.arange(7)] = q_base
        if recording.base_linear_acceleration is not None:
            base_acceleration = np.hstack([recording.base_angular_acceleration, recording.base_linear_acceleration])

    def coordinates(values, base_values):
        """(N, nv) of the joints' `values`, the base's `base_values` (None: the result is None)."""
        if values is None or (model.floating_base and base_values is None):
            return None
        result = np.zeros((len(recording), model.nv))
        result[:, v_index] = values[:, columns]
        if model.floating_base:
            result[:, model.v_index(ROOT_JOINT) + np.arange(6)] = base_values
        return result

    return ModelState(q, coordinates(recording.velocity, base_velocity),
                      coordinates(recording.acceleration, base_acceleration),
                      coordinates(recording.effort, np.zeros((len(recording), 6))), tuple(notes))


def _check_one_coordinate(model: Model, joints: list) -> None:
    """DataError for a joint of several coordinates (planar, floating): a recording holds one per joint."""
    types = dict(zip(model.body_joint_names, model.joint_type))
    several = [name for name in joints if JOINT_NQ[int(types[name])] != 1]
    if several:
        raise DataError(f"model '{model.name}' has joints with several coordinates {several}: a recording holds one "
                        "per joint (and the floating base root_joint apart)")


def _ignored(model: Model, recording: Recording) -> list:
    """Warnings for what of the recording the model has no coordinate for."""
    notes = []
    mimics = set(model.body_joint_names) - set(model.joint_names)  # joints that follow another's coordinate
    unknown = [name for name in recording.joint_names if name not in model.joint_names and name not in mimics]
    if unknown:
        notes.append(f"joints of {recording._what()} that model '{model.name}' does not have were ignored: {unknown}")
    if recording.has_base and not model.floating_base:
        notes.append(f"the floating base of {recording._what()} was ignored: model '{model.name}' has a fixed base")
    return notes
