"""Each record of the compiled step round-trips: written by field name in
Python, read by field name in compiled code (the kernels' way), every field
its own memory; the model's packed layout and the step's work layout, each
written once, size their buffers exactly and give every field its own
slots."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest
from mbs_dynamics.multibody.model import ModelArrays, packed_sizes, unpack_model
from mbs_dynamics.simulation.stepping import records
from mbs_dynamics.simulation.stepping.work import StepWork, lay_out_work
from numba import njit

from oracles import robot_path

RECORDS = {name: getattr(records, name) for name in ("SETTINGS", "SPHERE", "OBSTACLE", "ACTUATOR", "JOINT_TERMS",
                                                       "LIMIT", "POINT", "CONTACT", "COORDINATE", "BODY", "REPORT")}


def filled(dtype: np.dtype, count: int, rng) -> np.ndarray:
    """count records of dtype, every field set by name to distinct values."""
    values = {}
    for name in dtype.names:
        field = dtype.fields[name][0]
        shape = (count, *field.shape)
        base = field.base
        values[name] = (rng.random(shape) < 0.5 if base == np.bool_ else
                        rng.integers(-1000, 1000, shape) if base.kind == "i" else rng.standard_normal(shape))
    return records.new_record(dtype, count, **values), values


@njit(cache=False)
def read_obstacle(obstacles, k):
    o = obstacles[k]
    return o.kind, o.friction, o.restitution, o.centre.copy(), o.axes.copy(), o.half_extents.copy()


@njit(cache=False)
def read_settings(settings):
    s = settings[0]
    return s.dt, s.stabilization, s.margin, s.tolerance, s.max_iterations, s.integrator, s.compliance, s.steps


@njit(cache=False)
def read_actuator(actuation, r):
    a = actuation[r]
    return a.effort, a.stiffness, a.damping, a.limit, a.target_q, a.position_target, a.velocity_target


@njit(cache=False)
def write_contact(contacts, k, o, impulse, velocity, bias, in_solver):
    c = contacts[k, o]
    c.impulse[:] = impulse
    c.velocity[:] = velocity
    c.bias, c.in_solver = bias, in_solver


@pytest.mark.parametrize("name", RECORDS)
def test_every_field_has_its_own_memory(name):
    dtype = RECORDS[name]
    record, values = filled(dtype, 5, np.random.default_rng(1))
    for field, value in values.items():
        assert np.array_equal(record[field], value), field  # no field overwrote another
    assert dtype.isalignedstruct


def test_input_records_read_by_name_in_compiled_code():
    rng = np.random.default_rng(2)
    obstacles, values = filled(records.OBSTACLE, 3, rng)
    kind, friction, restitution, centre, axes, half = read_obstacle(obstacles, 2)
    assert (kind, friction, restitution) == (values["kind"][2], values["friction"][2], values["restitution"][2])
    assert np.array_equal(centre, values["centre"][2]) and np.array_equal(axes, values["axes"][2])
    assert np.array_equal(half, values["half_extents"][2])
    settings, values = filled(records.SETTINGS, 1, rng)
    assert read_settings(settings) == tuple(values[field][0] for field in records.SETTINGS.names)
    actuation, values = filled(records.ACTUATOR, 4, rng)
    assert read_actuator(actuation, 3) == tuple(values[field][3] for field in records.ACTUATOR.names)


def test_result_records_written_by_name_in_compiled_code():
    contacts = records.new_record(records.CONTACT, (3, 2))
    write_contact(contacts, 2, 1, np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]), 7.0, True)
    assert contacts[2, 1]["impulse"].tolist() == [1.0, 2.0, 3.0]
    assert contacts[2, 1]["velocity"].tolist() == [4.0, 5.0, 6.0]
    assert contacts[2, 1]["bias"] == 7.0 and contacts[2, 1]["in_solver"]
    assert np.count_nonzero(contacts["in_solver"]) == 1 and np.count_nonzero(contacts["impulse"]) == 3


@pytest.mark.parametrize("robot", ["talos", "solo12"])
def test_the_packed_model_round_trips(robot):
    """Packed by name (Model), read by name (unpack_model): every field equal
    to the model's own array, the buffers exactly as long as the layout."""
    model = mbs.Model.from_urdf_file(robot_path(robot), floating_base=True)
    floats, ints = model.packed
    views = unpack_model(model.packed)
    assert views.header.tolist() == [model.nbodies, len(model.quaternion_starts), model.nv]
    for name in ModelArrays._fields[1:]:
        assert np.array_equal(np.ravel(getattr(views, name)), np.ravel(getattr(model, name))), name
    assert packed_sizes(model.nbodies, len(model.quaternion_starts), model.nv) == (floats.size, ints.size)


def leaves(prefix, record):
    """(name, array) of every array in a tree of named tuples."""
    for name, value in record._asdict().items():
        if isinstance(value, np.ndarray):
            yield prefix + name, value
        else:
            yield from leaves(prefix + name + ".", value)


@pytest.mark.parametrize("shapes", [0, 5])
def test_the_work_layout_gives_every_field_its_own_slots(shapes):
    """Each work array filled with its own number: every slot of both buffers
    belongs to exactly one array, and the measured sizes are the buffers'
    (with shapes of bodies, and without: then the narrow phase's scratch is
    empty)."""
    dimensions = (19, 18, 13, 40, 3, shapes, 24)  # nq, nv, bodies, points, obstacles, shapes, collisions
    floats, ints = np.full(100_000, -1.0), np.full(10_000, -1, dtype=np.int64)
    work, float_end, int_end = lay_out_work(floats, ints, *dimensions)
    arrays = list(leaves("", work))
    for number, (name, array) in enumerate(arrays):
        array[...] = number
    for number, (name, array) in enumerate(arrays):
        assert np.all(array == number), f"{name} overlaps another work array"
    assert np.all(floats[:float_end] >= 0) and np.all(floats[float_end:] == -1.0)
    assert np.all(ints[:int_end] >= 0) and np.all(ints[int_end:] == -1)
    assert sum(array.size for name, array in arrays if array.dtype == np.float64) == float_end
    assert sum(array.size for name, array in arrays if array.dtype == np.int64) == int_end
    assert {name.split(".")[0] for name, _ in arrays} == set(StepWork._fields)
    assert (work.collision.query.polytope.faces.size > 0) == (shapes > 1)
