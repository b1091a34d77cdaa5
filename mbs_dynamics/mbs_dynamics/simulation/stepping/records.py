"""The records the compiled step reads and writes, each defined once here as
a numpy structured dtype: Python fills them by field name
(settings["compliance"] = ...), the kernels read them by field name
(settings.compliance, obstacle.kind). An array of records is one argument to
unbox, whatever its fields.

Inputs: SETTINGS (one per call), SPHERE (one per contact point of the
robot), OBSTACLE (one per obstacle), ACTUATOR and
JOINT_TERMS (one per velocity coordinate), LIMIT (one per limited
coordinate); the bodies' shapes are collision.shapes' SHAPE records.
Results, of the last step of a call (StepResults): POINT (one per contact
point), CONTACT (one per point and obstacle: also the next step's warm
start), COORDINATE (one per velocity coordinate: the joint impulse is the
next step's warm start), BODY (one per body), COLLISION (one per contact
point between two bodies, up to the room given: also the next step's warm
starts) and REPORT (one per call).
"""
import numpy as np

_float, _int, _bool = np.float64, np.int64, np.bool_


def _record(*fields) -> np.dtype:
    return np.dtype(list(fields), align=True)


SETTINGS = _record(
    ("dt", _float),              # the step (s)
    ("stabilization", _float),   # the share of a penetration pushed out per step
    ("margin", _float),          # how near an obstacle (m) a point enters the solver
    ("tolerance", _float),       # the solver's bound on the violation of the Coulomb law (m/s)
    ("max_iterations", _int),    # the solver's sweeps at most
    ("integrator", _int),        # of the smooth steps: integrator.EULER, RK4 or RKMK4
    ("compliance", _float),      # the softness of the contact rows (0: rigid)
    ("steps", _int),             # steps per call
)

SPHERE = _record(
    ("body", _int),             # the body it moves with, -1: fixed in the world
    ("centre", _float, (3,)),   # in the body's frame (world where fixed)
    ("radius", _float),         # 0: a point
)

OBSTACLE = _record(
    ("kind", _int),                   # obstacles.PLANE, BOX, ...
    ("friction", _float),             # Coulomb's coefficient of the robot's contacts with it
    ("restitution", _float),          # Newton's coefficient of restitution
    ("centre", _float, (3,)),         # world
    ("axes", _float, (3, 3)),         # rows: its local x, y, z in world axes (a plane's z: its normal)
    ("half_extents", _float, (3,)),   # a box's; a plane's unused
)

ACTUATOR = _record(
    ("effort", _float),            # commanded (N m or N)
    ("stiffness", _float),         # PD gains toward the targets
    ("damping", _float),
    ("limit", _float),             # the effort limit
    ("target_q", _int),            # the coordinate of q the position target is for, -1 where none
    ("position_target", _float),
    ("velocity_target", _float),
)

JOINT_TERMS = _record(
    ("damping", _float),             # viscous (N m s/rad or N s/m), 0 where off
    ("friction", _float),            # Coulomb (N m or N), 0 where off
    ("static", _float),              # static friction (N m or N, >= friction), 0 where off
    ("stribeck_velocity", _float),   # (rad/s or m/s, > 0)
    ("offset", _float),              # a constant friction torque (N m or N), 0 where off
)

LIMIT = _record(
    ("q", _int),            # the limited coordinate in q
    ("v", _int),            # and in v
    ("lower", _float),
    ("upper", _float),
)

POINT = _record(
    ("force", _float, (3,)),   # the mean force of the obstacles on it over the step, world
    ("gap", _float),           # its distance from the nearest obstacle at the step's start (m)
    ("touching", _bool),       # whether it was in the solver
)

CONTACT = _record(
    ("impulse", _float, (3,)),    # along the pair's axes (n, t1, t2): the next step's warm start
    ("velocity", _float, (3,)),   # of the contact point after the step, along (n, t1, t2)
    ("bias", _float),             # of the normal row: the Signorini condition is on velocity[0] + bias
    ("tangent_bias", _float, (2,)),  # of the tangential rows: sticking is velocity[1:] + tangent_bias = 0
    ("in_solver", _bool),
)

COORDINATE = _record(
    ("joint_impulse", _float),   # of the joint's limits and friction: the next step's warm start
    ("applied", _float),         # the actuator's effort
    ("acceleration", _float),    # (v⁺ - v) / dt
)

BODY = _record(
    ("wrench", _float, (6,)),    # the contact forces on the body, [torque; force] in its frame about its origin
)

COLLISION = _record(
    ("shape_a", _int),            # the two shapes (rows of the world's ShapeSet) that touch, and their bodies
    ("shape_b", _int),
    ("body_a", _int),
    ("body_b", _int),
    ("location", _float, (3,)),   # the contact point, midway between the shapes (world)
    ("gap", _float),              # along the normal at the step's start (negative: penetration)
    ("axes", _float, (3, 3)),     # rows n (from a to b), t1, t2
    ("impulse", _float, (3,)),    # of a on b along the axes: the next step's warm start
    ("velocity", _float, (3,)),   # of b relative to a at the point after the step, along the axes
    ("bias", _float),             # of the normal row, as CONTACT's
    ("tangent_bias", _float, (2,)),  # of the tangential rows, as CONTACT's
)

REPORT = _record(
    ("status", _int),        # 0, or inputs.INVALID_INPUT, NONFINITE_RESULT, SINGULAR_MASS_MATRIX
    ("pivot", _int),         # with SINGULAR_MASS_MATRIX, the velocity index of the vanishing pivot; else -1
    ("steps", _int),         # taken (a call stops at a step it cannot take)
    ("sweeps", _int),        # the solver's, in the last step
    ("residual", _float),    # the largest violation of the law over the call's steps (m/s)
    ("limits", _int),        # the joint limits in the last step's solver
    ("unconverged", _int),   # steps whose solver ended above the tolerance
    ("smooth", _int),        # steps taken by the smooth integrator
    ("softened", _int),      # steps whose rows were solved softer than the compliance
    ("collisions", _int),    # the COLLISION records of the last step that hold a contact
    ("dropped", _int),       # contacts between bodies beyond the COLLISION records' room, over the call's steps
)


def new_record(dtype: np.dtype, shape=(), **values) -> np.ndarray:
    """An array of records of `dtype`, zero but for `values` (field: value)."""
    records = np.zeros(shape, dtype=dtype)
    for name, value in values.items():
        records[name] = value
    return records


def copy_records(records: np.ndarray) -> np.ndarray:
    """A writable copy of an array of records, through its bytes: numpy copies
    a structured array field by field (1-2 us for a few records; this, 0.6)."""
    return np.frombuffer(bytearray(records.tobytes()), records.dtype).reshape(records.shape)
