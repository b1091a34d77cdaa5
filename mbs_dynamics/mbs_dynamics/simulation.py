"""A robot in a world: gravity, a ground plane touched at listed points, and
the joints' URDF position limits, damping and friction; the state (t, q, v)
advanced by step(tau). What the simulator node integrates, without ROS.

Every step is first taken by velocity-level time stepping (time_stepping.contact_step:
semi-implicit Euler with the contact, limit and joint-friction impulses,
damping implicit). With integrator 'rk4' or 'rkmk4', a step in which no
constraint engages (no point within reach of the ground, no joint at or
reaching a limit, no joint friction) is taken again by that integrator, with
the damping as a force: smooth motion gets its order, and contacts and limits
their impulses (first order).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbs_dynamics import inputs
from mbs_dynamics.aba import forward_dynamics
from mbs_dynamics.contact import PointContact
from mbs_dynamics.integrators import INTEGRATORS, step
from mbs_dynamics.model import Model
from mbs_dynamics.rnea import nonlinear_effects
from mbs_dynamics.time_stepping import DEFAULT_GROUND, ContactStep, Ground, contact_step, position_limits


@dataclass(frozen=True)
class World:
    """What the robot meets: `ground` (None: no ground) touched at
    `contact_points` (PointContact: points fixed in link frames, e.g. the
    feet), and which of the joints' URDF properties act."""

    ground: Ground | None = field(default_factory=Ground)
    contact_points: tuple = ()
    joint_limits: bool = True
    joint_damping: bool = True
    joint_friction: bool = True

    def __post_init__(self):
        points = tuple(self.contact_points)
        for point in points:
            if not isinstance(point, PointContact):
                raise ValueError(f"contact points must be PointContact(frame, point), got {point!r}")
        if points and self.ground is None:
            raise ValueError("contact points need a ground")
        object.__setattr__(self, "contact_points", points)


def outside_limits(model: Model, q) -> list[str]:
    """The joints whose position in q lies outside their URDF limits."""
    names = {int(model.q_index(name)): name for name in model.joint_names}
    outside = (q < model.lower_position_limit) | (q > model.upper_position_limit)
    return [names[index] for index in np.flatnonzero(outside) if index in names]


def initial_configuration(model: Model, positions: dict | None = None) -> np.ndarray:
    """The neutral configuration moved inside the joint limits (a joint whose
    neutral 0 lies outside them starts at their middle), then `positions`
    (joint name -> value) applied, each checked against its limits."""
    q = model.neutral_configuration()
    limit_q, _, lower, upper = position_limits(model)
    outside = (q[limit_q] < lower) | (q[limit_q] > upper)
    q[limit_q[outside]] = 0.5 * (lower[outside] + upper[outside])
    for name, value in (positions or {}).items():
        q[model.q_index(name)] = value
    q = inputs.configuration(model, q, batch=False)
    outside = outside_limits(model, q)
    if outside:
        raise ValueError(f"initial positions outside the joint limits: {outside}")
    return q


class Simulation:
    """The state (time, q, v) of `model` in `world`, advanced by step(tau) at dt
    (module docstring); `steps` counts the steps since reset. `last` is the last step's ContactStep (its contact
    forces, solver sweeps and residual)."""

    def __init__(self, model: Model, world: World = World(), dt: float = 1e-3,
                 integrator: str = "semi_implicit_euler", q=None, v=None):
        if integrator not in INTEGRATORS:
            raise ValueError(f"integrator must be one of {', '.join(INTEGRATORS)}, got {integrator!r}")
        dt = float(dt)
        if not np.isfinite(dt) or dt <= 0:
            raise ValueError(f"dt must be a positive finite number, got {dt}")
        self.model, self.dt, self.integrator = model, dt, integrator
        self.set_world(world)
        self.set_initial_state(initial_configuration(model) if q is None else q,
                               np.zeros(model.nv) if v is None else v)
        self.reset()

    def set_world(self, world: World) -> None:
        """What the robot meets from now on; the state goes on."""
        if not isinstance(world, World):
            raise ValueError(f"world must be a World, got {world!r}")
        self.world = world
        self._smooth_possible = self.integrator != "semi_implicit_euler" and not (
            world.joint_friction and np.any(self.model.friction > 0))
        self._warm_start = np.zeros((len(world.contact_points), 3))
        self.last = None  # its forces are of the old contact points

    def set_initial_state(self, q, v) -> None:
        """The state reset() goes back to (checked as set_state checks)."""
        self.initial_q, self.initial_v = self._checked(q, v)

    def reset(self, q=None, v=None) -> None:
        """Back to time 0 at (q, v), by default the initial state."""
        self.set_state(self.initial_q if q is None else q, self.initial_v if v is None else v)
        self.steps = 0

    def _checked(self, q, v) -> tuple[np.ndarray, np.ndarray]:
        """(q, v) as float arrays, quaternions normalised; ValueError when invalid
        or too large to compute with (the dynamics at (q, v) overflow)."""
        q = np.array(inputs.configuration(self.model, q, batch=False))
        for start, _ in self.model.quaternions:
            q[start:start + 4] /= np.linalg.norm(q[start:start + 4])
        v = np.array(inputs.vector(self.model, v, self.model.nv, "v", batch=False))
        nonlinear_effects(self.model, q, v)
        return q, v

    def set_state(self, q, v) -> None:
        """Put the robot at (q, v) now (quaternions normalised); time goes on."""
        self.q, self.v = self._checked(q, v)
        self._warm_start = np.zeros((len(self.world.contact_points), 3))
        self._joint_warm_start = np.zeros(self.model.nv)
        self.last: ContactStep | None = None

    @property
    def contact_forces(self) -> np.ndarray:
        """(k, 3) the mean force of the ground on each contact point over the
        last step, world axes."""
        if self.last is None:
            return np.zeros((len(self.world.contact_points), 3))
        return self.last.forces

    def step(self, tau) -> ContactStep:
        """One step of dt under the joint efforts tau (nv,)."""
        world, model = self.world, self.model
        tau = inputs.vector(model, tau, model.nv, "tau", batch=False)
        result = contact_step(model, self.q, self.v, tau, self.dt, world.contact_points,
                              world.ground if world.ground is not None else DEFAULT_GROUND,
                              warm_start=self._warm_start, joint_warm_start=self._joint_warm_start,
                              joint_limits=world.joint_limits,
                              joint_damping=world.joint_damping, joint_friction=world.joint_friction)
        if self._smooth_possible and not result.active.any() and result.limits_active == 0:
            damping = model.damping if world.joint_damping else 0.0
            q, v = step(model, self.q, self.v, None, self.dt, self.integrator,
                        acceleration=lambda q, v: forward_dynamics(model, q, v, tau - damping * v))
            result = ContactStep(q, v, result.forces, result.impulses, result.active, result.gaps, 0, 0.0, True,
                                 np.zeros(model.nv), 0)
        self.q, self.v = result
        self._warm_start, self._joint_warm_start = result.impulses, result.joint_impulses
        self.steps += 1
        self.last = result
        return result

    @property
    def time(self) -> float:
        """Simulated time (s): steps times dt, so that 1000 steps of 1 ms are 1.0 s exactly."""
        return self.steps * self.dt
