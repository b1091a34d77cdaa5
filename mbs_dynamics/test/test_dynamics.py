"""CRBA, ABA, M^-1, centre of mass, centroidal momentum and frame Jacobians:
against Pinocchio on real robots, and against the invariants of DESIGN.md §5
(ID(FD) = tau, ABA = M^-1 (tau - h), tree zeros, kinetic energy, Jv = the
finite-difference twist, A_G v = h_G, l = m dc/dt)."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest

from helpers import FLOATING, chain, close, mass_matrix_by_rnea, massless_chain_end
from oracles import REAL_ROBOTS, Pair, robot_path

ROBOTS = sorted(set(REAL_ROBOTS) - {"talos_full"})


@pytest.mark.parametrize("name", ROBOTS)
def test_mass_matrix_and_forward_dynamics_match_pinocchio(name):
    pair = Pair(robot_path(name), floating_base=name in FLOATING)
    pin, pm, d, P = pair.pin, pair.pin_model, pair.data, pair.P
    rng = np.random.default_rng(10)
    for _ in range(3):
        q, v, tau = pair.random_state(rng)
        qp = pair.q(q)
        M_pin = pin.crba(pm, d, qp)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        M = mbs.mass_matrix(pair.model, q)
        close(M, P @ M_pin @ P.T)
        np.testing.assert_array_equal(M, M.T)
        close(mbs.forward_dynamics(pair.model, q, v, tau), P @ pin.aba(pm, d, qp, pair.v(v), pair.v(tau)))


@pytest.mark.parametrize("name", ROBOTS)
def test_centroidal_quantities_match_pinocchio(name):
    pair = Pair(robot_path(name), floating_base=name in FLOATING)
    pin, pm, d = pair.pin, pair.pin_model, pair.data
    rng = np.random.default_rng(11)
    rows = np.r_[3:6, 0:3]
    for _ in range(3):
        q, v, _ = pair.random_state(rng)
        qp, vp = pair.q(q), pair.v(v)
        close(mbs.center_of_mass(pair.model, q), pin.centerOfMass(pm, d, qp), 1e-12)
        pin.computeCentroidalMomentum(pm, d, qp, vp)
        h = mbs.centroidal_momentum(pair.model, q, v)
        close(h, d.hg.vector[rows])
        A_pin = pin.computeCentroidalMap(pm, d, qp)
        close(mbs.centroidal_momentum_matrix(pair.model, q), A_pin[rows] @ pair.P.T)
        h_state, com_state = mbs.centroidal_state(pair.model, q, v)  # both from one pass
        close(h_state, d.hg.vector[rows])
        close(com_state, pin.centerOfMass(pm, d, qp), 1e-12)
        # the energies: Pinocchio's potential is -sum m_i g^T c_i, ours -m g^T c, the same
        close(mbs.kinetic_energy(pair.model, q, v), pin.computeKineticEnergy(pm, d, qp, vp))
        close(mbs.potential_energy(pair.model, q), pin.computePotentialEnergy(pm, d, qp))


@pytest.mark.parametrize("name", ["ur5", "panda", "talos", "pr2", "anymal"])
def test_frame_jacobians_match_pinocchio(name):
    pair = Pair(robot_path(name), floating_base=name in FLOATING)
    pin, pm, d = pair.pin, pair.pin_model, pair.data
    rng = np.random.default_rng(12)
    rows = np.r_[3:6, 0:3]
    references = {"body": pin.LOCAL, "spatial": pin.WORLD, "hybrid": pin.LOCAL_WORLD_ALIGNED}
    q, _, _ = pair.random_state(rng)
    qp = pair.q(q)
    pin.computeJointJacobians(pm, d, qp)
    pin.updateFramePlacements(pm, d)
    for frame in pair.model.frame_names[:: max(1, len(pair.model.frame_names) // 8)]:
        jacobians = {}
        for representation, reference in references.items():
            J_pin = pin.getFrameJacobian(pm, d, pm.getFrameId(frame), reference)[rows] @ pair.P.T
            jacobians[representation] = mbs.frame_jacobian(pair.model, q, frame, representation)
            close(jacobians[representation], J_pin, 1e-12)
        mixed = mbs.frame_jacobian(pair.model, q, frame, "mixed")
        close(mixed[:3], jacobians["body"][:3], 1e-15)
        close(mixed[3:], jacobians["hybrid"][3:], 1e-15)


def test_coupled_mimic_mass_matrix_matches_pinocchio_mimic():
    pair = Pair(robot_path("panda"), mimic="coupled")
    pin, pm, d = pair.pin, pair.pin_model, pair.data
    rng = np.random.default_rng(13)
    q, v, tau = pair.random_state(rng)
    M_pin = pin.crba(pm, d, pair.q(q))
    M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
    close(mbs.mass_matrix(pair.model, q), pair.P @ M_pin @ pair.P.T)
    a = mbs.forward_dynamics(pair.model, q, v, tau)  # by M^-1 (tau - h) for a coupled model
    close(mbs.inverse_dynamics(pair.model, q, v, a), tau)


# --- invariants on synthetic and real robots ------------------------------


@pytest.mark.parametrize("mimic", ["coupled", "independent"])
def test_invariants_on_a_chain_with_prismatic_planar_and_mimic_joints(mimic):
    model = chain(mimic)
    rng = np.random.default_rng(14)
    q, v, tau = rng.uniform(-1, 1, model.nq), rng.normal(size=model.nv), rng.normal(size=model.nv)
    M = mbs.mass_matrix(model, q)
    close(M, mass_matrix_by_rnea(model, q), 1e-12)  # CRBA = columns of RNEA
    a = mbs.forward_dynamics(model, q, v, tau)
    close(mbs.inverse_dynamics(model, q, v, a), tau, 1e-12)  # ID(FD) = tau
    close(a, np.linalg.solve(M, tau - mbs.nonlinear_effects(model, q, v)), 1e-10)
    # h_G = A_G v: a coordinate that moves two bodies (a mimic's and its master's) has their momenta summed
    close(mbs.centroidal_momentum_matrix(model, q) @ v, mbs.centroidal_momentum(model, q, v), 1e-12)


def kinetic_energy_of_bodies(model, q, v):
    """sum_i 1/2 v_i^T I_i v_i with v_i from body-frame Jacobians of the bodies' frames."""
    energy = 0.0
    for body in range(model.nbodies):
        frame = next(f for f in model.frames.values() if f.body == body and np.allclose(f.translation, 0)
                     and np.allclose(f.rotation, np.eye(3)))
        twist = mbs.frame_jacobian(model, q, frame.name, "body") @ v
        w, u = twist[:3], twist[3:]
        m, h, I_O = model.mass[body], model.first_moment[body], model.rotational_inertia[body]
        energy += 0.5 * (w @ I_O @ w + m * u @ u + 2 * u @ np.cross(w, h))
    return energy


@pytest.mark.parametrize("name", ["talos", "solo12", "tiago"])
def test_real_robot_invariants(name):
    model = mbs.Model.from_urdf_file(robot_path(name), floating_base=name in FLOATING)
    pair = Pair(robot_path(name), floating_base=name in FLOATING)
    rng = np.random.default_rng(15)
    q, v, tau = pair.random_state(rng)
    M = mbs.mass_matrix(model, q)
    assert np.linalg.eigvalsh(M)[0] > 0
    a = mbs.forward_dynamics(model, q, v, tau)
    close(mbs.inverse_dynamics(model, q, v, a), tau)
    close(0.5 * v @ M @ v, kinetic_energy_of_bodies(model, q, v))
    close(mbs.kinetic_energy(model, q, v), 0.5 * v @ M @ v)
    Minv = mbs.InverseMassMatrix(model, q)
    X = rng.normal(size=(model.nv, 3))
    close(Minv @ X, np.linalg.solve(M, X))
    h = mbs.centroidal_momentum(model, q, v)
    close(mbs.centroidal_momentum_matrix(model, q) @ v, h)
    close(h[3:], model.total_mass * mbs.center_of_mass_velocity(model, q, v))


@pytest.mark.parametrize("name", ["solo12", "talos", "panda"])
def test_mass_matrix_paths_on_the_rneas_placements_are_the_mass_matrix(name):
    """The step's and contact dynamics' CRBA (crba_paths_kernel, placed) reads
    the joint placements the RNEA left in the same buffer at the same q: the
    entries on the paths to the root are mass_matrix's, bit for bit, and
    those it computes placing the joints itself; after another q's RNEA they
    differ (what it reads is the buffer's)."""
    from mbs_dynamics.algorithms.crba import crba_paths_kernel
    from mbs_dynamics.algorithms.rnea import rnea_kernel
    from mbs_dynamics.multibody.workspace import scratch

    pair = Pair(robot_path(name), floating_base=name in FLOATING)
    model = pair.model
    rng = np.random.default_rng(12)
    buffer, h, no_force = scratch(model), np.empty(model.nv), np.zeros((0, 6))
    dof_parent = model.dof_parent
    on_paths = np.zeros((model.nv, model.nv), dtype=bool)
    for k in range(model.nv):
        j = k
        while j >= 0:
            on_paths[k, j] = True
            j = dof_parent[j]

    def read_only(x):  # as the step passes them to the RNEA (its one compiled version)
        x = x.copy()
        x.flags.writeable = False
        return x

    zero = read_only(np.zeros(model.nv))
    for _ in range(3):
        q, v, _ = pair.random_state(rng)
        other_q = pair.random_state(rng)[0]
        placed, computed, stale = (np.zeros((model.nv, model.nv)) for _ in range(3))
        assert rnea_kernel(model.packed, read_only(q), read_only(v), zero, no_force, h, buffer) == 0
        assert crba_paths_kernel(model.packed, dof_parent, q, placed, buffer, np.bool_(True)) == 0
        assert crba_paths_kernel(model.packed, dof_parent, q, computed, buffer, np.bool_(False)) == 0
        assert placed.tobytes() == computed.tobytes()
        assert placed[on_paths].tobytes() == mbs.mass_matrix(model, q)[on_paths].tobytes()
        assert rnea_kernel(model.packed, read_only(other_q), read_only(v), zero, no_force, h, buffer) == 0
        assert crba_paths_kernel(model.packed, dof_parent, q, stale, buffer, np.bool_(True)) == 0
        assert not np.array_equal(stale, placed)


def test_tree_zeros_between_branches():
    model = mbs.Model.from_urdf_file(robot_path("talos"), floating_base=True)
    q = Pair(robot_path("talos"), floating_base=True).random_state(np.random.default_rng(16))[0]
    M = mbs.mass_matrix(model, q)
    left = [model.v_index(f"leg_left_{i}_joint") for i in range(1, 7)]
    right = [model.v_index(f"leg_right_{i}_joint") for i in range(1, 7)]
    assert np.all(M[np.ix_(left, right)] == 0.0)
    assert np.linalg.norm(M[np.ix_(left, left)]) > 0


@pytest.mark.parametrize("representation", ["body", "spatial", "hybrid", "mixed"])
def test_jacobian_gives_the_finite_difference_twist(representation):
    model = chain("coupled")
    rng = np.random.default_rng(17)
    q, v = rng.uniform(-1, 1, model.nq), rng.normal(size=model.nv)
    h = 1e-6
    for frame in ("l3", "l5", "l6"):
        before, after = mbs.frame_pose(model, q - h * v, frame), mbs.frame_pose(model, q + h * v, frame)
        pose = mbs.frame_pose(model, q, frame)
        R, r = pose[:3, :3], pose[:3, 3]
        dR = (after[:3, :3] - before[:3, :3]) / (2 * h)
        dr = (after[:3, 3] - before[:3, 3]) / (2 * h)
        w_world = np.array([(dR @ R.T)[2, 1], (dR @ R.T)[0, 2], (dR @ R.T)[1, 0]])
        expected = {
            "hybrid": np.r_[w_world, dr],
            "spatial": np.r_[w_world, dr - np.cross(w_world, r)],
            "body": np.r_[R.T @ w_world, R.T @ dr],
            "mixed": np.r_[R.T @ w_world, dr],
        }[representation]
        close(mbs.frame_jacobian(model, q, frame, representation) @ v, expected, 1e-8)


# --- batches, singular models, bad input -----------------------------------


def test_batches_equal_one_state_at_a_time():
    pair = Pair(robot_path("talos"), floating_base=True)
    rng = np.random.default_rng(18)
    q, v, tau = (np.array(x) for x in zip(*[pair.random_state(rng) for _ in range(12)], strict=True))
    M, a, h = (mbs.mass_matrix(pair.model, q), mbs.forward_dynamics(pair.model, q, v, tau),
               mbs.centroidal_momentum(pair.model, q, v))
    T, V = mbs.kinetic_energy(pair.model, q, v), mbs.potential_energy(pair.model, q)
    for k in range(12):
        np.testing.assert_array_equal(M[k], mbs.mass_matrix(pair.model, q[k]))
        np.testing.assert_array_equal(a[k], mbs.forward_dynamics(pair.model, q[k], v[k], tau[k]))
        close(h[k], mbs.centroidal_momentum(pair.model, q[k], v[k]), 1e-14)
        close(T[k], mbs.kinetic_energy(pair.model, q[k], v[k]), 1e-14)
        close(V[k], mbs.potential_energy(pair.model, q[k]), 1e-14)


@pytest.mark.parametrize("states", [3, 6])  # 6 = nv: a batch the size of the matrix once passed as one matrix
def test_batched_forward_dynamics_with_coupled_mimic_joints(states):
    model = chain("coupled")
    assert model.has_coupled_joints and model.nv == 6
    rng = np.random.default_rng(19)
    q, v, tau = rng.uniform(-1, 1, (states, model.nq)), rng.normal(size=(states, model.nv)), \
        rng.normal(size=(states, model.nv))
    a = mbs.forward_dynamics(model, q, v, tau)
    for k in range(states):
        close(a[k], mbs.forward_dynamics(model, q[k], v[k], tau[k]), 1e-12)
        close(mbs.inverse_dynamics(model, q[k], v[k], a[k]), tau[k], 1e-10)


def test_massless_chain_end_is_reported_not_nan():
    model = massless_chain_end()
    with pytest.raises(mbs.SingularMassMatrix, match="joint 'j2' moves no mass or inertia"):
        mbs.forward_dynamics(model, np.zeros(2), np.zeros(2), np.ones(2))
    with pytest.raises(mbs.SingularMassMatrix, match="'j2'"):
        mbs.InverseMassMatrix(model, np.zeros(2))


def test_bad_representation_and_frame():
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    q = model.neutral_configuration()
    with pytest.raises(ValueError, match="representation must be one of body, spatial, hybrid, mixed"):
        mbs.frame_jacobian(model, q, "tcp", "local")
    with pytest.raises(ValueError, match="has no frame 'hand'"):
        mbs.frame_jacobian(model, q, "hand")
    assert not mbs.frame_jacobian(model, q, "base_link").any()  # fixed to the world


def test_concurrent_calls_from_threads_give_the_sequential_answers():
    """Scratch arrays are per thread: a multi-threaded executor may call from many threads."""
    from concurrent.futures import ThreadPoolExecutor

    pair = Pair(robot_path("talos"), floating_base=True)
    model = pair.model
    rng = np.random.default_rng(19)
    states = [pair.random_state(rng) for _ in range(64)]

    def everything(state):
        q, v, tau = state
        return (mbs.inverse_dynamics(model, q, v, tau), mbs.forward_dynamics(model, q, v, tau),
                mbs.mass_matrix(model, q), mbs.centroidal_momentum(model, q, v),
                mbs.frame_jacobian(model, q, "left_sole_link"), mbs.body_poses(model, q)[1])

    sequential = [everything(s) for s in states]
    with ThreadPoolExecutor(8) as pool:
        concurrent = list(pool.map(everything, states * 4))
    for k, results in enumerate(concurrent):
        for got, expected in zip(results, sequential[k % 64], strict=True):
            np.testing.assert_array_equal(got, expected)


def test_results_do_not_alias_scratch_arrays():
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    q1, q2 = np.zeros(7), np.full(7, 0.5)
    poses = mbs.body_poses(model, q1)[1].copy()
    first = mbs.body_poses(model, q1)[1]
    mbs.body_poses(model, q2)
    np.testing.assert_array_equal(first, poses)
    tau = mbs.gravity_torques(model, q1)
    saved = tau.copy()
    mbs.gravity_torques(model, q2)
    np.testing.assert_array_equal(tau, saved)


READ_ONLY_CALLS = {  # every public function of one state, its vector arguments by what they are
    "mass_matrix": lambda model, q, v: mbs.mass_matrix(model, q),
    "inverse_dynamics": lambda model, q, v: mbs.inverse_dynamics(model, q, v, v),
    "forward_dynamics": lambda model, q, v: mbs.forward_dynamics(model, q, v, v),
    "nonlinear_effects": lambda model, q, v: mbs.nonlinear_effects(model, q, v),
    "gravity_torques": lambda model, q, v: mbs.gravity_torques(model, q),
    "center_of_mass": lambda model, q, v: mbs.center_of_mass(model, q),
    "center_of_mass_velocity": lambda model, q, v: mbs.center_of_mass_velocity(model, q, v),
    "centroidal_momentum": lambda model, q, v: mbs.centroidal_momentum(model, q, v),
    "centroidal_state": lambda model, q, v: np.concatenate(mbs.centroidal_state(model, q, v)),
    "centroidal_momentum_matrix": lambda model, q, v: mbs.centroidal_momentum_matrix(model, q),
    "kinetic_energy": lambda model, q, v: mbs.kinetic_energy(model, q, v),
    "potential_energy": lambda model, q, v: mbs.potential_energy(model, q),
    "body_poses": lambda model, q, v: mbs.body_poses(model, q)[1],
    "frame_pose": lambda model, q, v: mbs.frame_pose(model, q, "FL_FOOT"),
    "frame_jacobian": lambda model, q, v: mbs.frame_jacobian(model, q, "FL_FOOT", "hybrid"),
    "frame_velocity": lambda model, q, v: mbs.frame_velocity(model, q, v, "FL_FOOT"),
}


@pytest.mark.parametrize("function", sorted(READ_ONLY_CALLS))
def test_read_only_inputs_alone_or_beside_writable_ones(function):
    """A read-only q or v (a recording's, a frozen buffer's) gives the numbers
    writable ones give, also beside a writable vector: center_of_mass pairs
    the user's q with a zero v of its own, and a kernel's check of its inputs
    once failed to compile for the pair (numba TypingError)."""
    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
    rng = np.random.default_rng(31)
    q = model.neutral_configuration() + np.r_[rng.normal(size=3), 0, 0, 0, 0, rng.uniform(-1, 1, model.nq - 7)]
    v = rng.normal(size=model.nv)
    readonly_q, readonly_v = q.copy(), v.copy()
    readonly_q.setflags(write=False)
    readonly_v.setflags(write=False)
    call = READ_ONLY_CALLS[function]
    expected = call(model, q, v)
    for other_q, other_v in [(readonly_q, v), (q, readonly_v), (readonly_q, readonly_v)]:
        np.testing.assert_array_equal(call(model, other_q, other_v), expected)


@pytest.mark.parametrize("batch", [False, True])
def test_invalid_values_are_reported_by_every_algorithm(batch):
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    bad_q, bad_v = q.copy(), v.copy()
    bad_q[3:7] = [0, 0, 0, 2.0]
    bad_v[7] = np.nan
    if batch:
        q, v, bad_q, bad_v = (np.tile(x, (3, 1)) for x in (q, v, bad_q, bad_v))
    quaternion = "the quaternion of joint 'root_joint', has norm 2"
    nan = "v has a non-finite value"
    with pytest.raises(ValueError, match=quaternion):
        mbs.mass_matrix(model, bad_q)
    with pytest.raises(ValueError, match=quaternion):
        mbs.forward_dynamics(model, bad_q, v, v)
    with pytest.raises(ValueError, match=nan):
        mbs.forward_dynamics(model, q, bad_v, v)
    with pytest.raises(ValueError, match="tau has a non-finite value"):
        mbs.forward_dynamics(model, q, v, bad_v)
    with pytest.raises(ValueError, match=nan):
        mbs.centroidal_momentum(model, q, bad_v)
    with pytest.raises(ValueError, match=quaternion):
        mbs.centroidal_momentum(model, bad_q, v)
    with pytest.raises(ValueError, match=nan):
        mbs.nonlinear_effects(model, q, bad_v)
    with pytest.raises(ValueError, match=r"a has a non-finite value"):
        mbs.inverse_dynamics(model, q, v, bad_v)


@pytest.fixture
def three_threads(monkeypatch):
    """Batches split over 3 threads, however small (parallel.run_batch)."""
    monkeypatch.setattr(mbs.parallel, "MIN_PARALLEL_WORK", 1)
    threads = mbs.get_num_threads()
    mbs.set_num_threads(3)
    yield
    mbs.set_num_threads(threads)


def test_batches_split_over_threads_equal_one_state_at_a_time(three_threads):
    pair = Pair(robot_path("talos"), floating_base=True)
    model, rng = pair.model, np.random.default_rng(20)
    q, v, x = (np.array(s) for s in zip(*[pair.random_state(rng) for _ in range(7)], strict=True))
    batched = {
        "inverse_dynamics": (mbs.inverse_dynamics, (q, v, x)),
        "forward_dynamics": (mbs.forward_dynamics, (q, v, x)),
        "mass_matrix": (mbs.mass_matrix, (q,)),
        "centroidal_momentum": (mbs.centroidal_momentum, (q, v)),
        "joint_torque_regressor": (mbs.joint_torque_regressor, (q, v, x)),
        "inverse_dynamics_derivatives": (mbs.inverse_dynamics_derivatives, (q, v, x)),
        "forward_dynamics_derivatives": (mbs.forward_dynamics_derivatives, (q, v, x)),
        "linearize": (mbs.linearize, (q, v, x)),
    }
    for name, (function, states) in batched.items():
        results = function(model, *states)
        for k in range(len(q)):
            single = function(model, *(s[k] for s in states))
            for batch_result, one in zip(results if isinstance(results, tuple) else (results,),
                                         single if isinstance(single, tuple) else (single,), strict=True):
                np.testing.assert_array_equal(batch_result[k], one, err_msg=f"{name}, state {k}")
    bad = v.copy()
    bad[-1, 4] = np.nan  # in the last thread's slice
    with pytest.raises(ValueError, match=r"v has a non-finite value \(nan\) at index \(6, 4\)"):
        mbs.forward_dynamics(model, q, bad, x)
    with pytest.raises(ValueError, match="threads must be a positive integer, got 0"):
        mbs.set_num_threads(0)


def test_batches_from_several_python_threads_at_once(three_threads):
    """Callers in threads of their own (a node's executor, Dask's workers) share
    the batch threads; each gets its own results."""
    from concurrent.futures import ThreadPoolExecutor
    model = mbs.Model.from_urdf_file(robot_path("ur5"))
    rng = np.random.default_rng(21)
    batches = [(rng.uniform(-3, 3, (50, model.nq)), rng.normal(size=(50, model.nv)), rng.normal(size=(50, model.nv)))
               for _ in range(8)]
    expected = [mbs.inverse_dynamics(model, *batch) for batch in batches]
    with ThreadPoolExecutor(4) as callers:
        results = list(callers.map(lambda batch: mbs.inverse_dynamics(model, *batch), batches * 5))
    for k, tau in enumerate(results):
        np.testing.assert_array_equal(tau, expected[k % 8])


FAST_PATHS = {  # each function with a per-call fast path (inputs.ExactKernel), its arguments by what they are
    "inverse_dynamics": lambda model, q, v: mbs.inverse_dynamics(model, q, v, v),
    "nonlinear_effects": lambda model, q, v: mbs.nonlinear_effects(model, q, v),
    "forward_dynamics": lambda model, q, v: mbs.forward_dynamics(model, q, v, v),
    "mass_matrix": lambda model, q, v: mbs.mass_matrix(model, q),
    "centroidal_momentum": lambda model, q, v: mbs.centroidal_momentum(model, q, v),
    "centroidal_momentum_matrix": lambda model, q, v: mbs.centroidal_momentum_matrix(model, q),
    "frame_jacobian": lambda model, q, v: mbs.frame_jacobian(model, q, "FL_FOOT"),
}


@pytest.mark.parametrize("function", sorted(FAST_PATHS))
def test_fast_paths_take_any_array_like_and_compile_one_version(function):
    """The fast path takes float64 vectors as they are and refuses every other
    type (list, float32, integers, read-only, strided, Fortran-ordered 2-D)
    to the checked path, which converts them: the same numbers to the last
    bit, one compiled signature of the fast path, and fresh results (a
    later call leaves an earlier result alone)."""
    from mbs_dynamics.algorithms import aba, centroidal, crba, kinematics, rnea

    kernels = {"inverse_dynamics": rnea._INVERSE_DYNAMICS, "nonlinear_effects": rnea._NONLINEAR_EFFECTS,
               "forward_dynamics": aba._FORWARD_DYNAMICS, "mass_matrix": crba._MASS_MATRIX,
               "centroidal_momentum": centroidal._CENTROIDAL_MOMENTUM,
               "centroidal_momentum_matrix": centroidal._CENTROIDAL_MOMENTUM_MATRIX,
               "frame_jacobian": kinematics._FRAME_JACOBIAN}
    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
    rng = np.random.default_rng(23)
    q = model.neutral_configuration() + np.r_[rng.normal(size=3), 0, 0, 0, 0, rng.uniform(-1, 1, model.nq - 7)]
    v = rng.normal(size=model.nv)
    call = FAST_PATHS[function]
    expected = call(model, q, v)
    kept = expected.copy()
    readonly_q, readonly_v = q.copy(), v.copy()
    readonly_q.setflags(write=False)
    readonly_v.setflags(write=False)
    strided_q, strided_v = np.repeat(q, 2)[::2], np.repeat(v, 2)[::2]
    for other_q, other_v in [(list(q), list(v)), (tuple(q), v), (readonly_q, readonly_v), (strided_q, strided_v),
                             (q.astype(np.longdouble), v.astype(np.longdouble))]:
        np.testing.assert_array_equal(call(model, other_q, other_v), expected)
    call(model, np.r_[q[:7], q[7:] + 0.1], v + 0.1)
    np.testing.assert_array_equal(expected, kept)  # not overwritten by the later calls
    assert len(kernels[function].call.signatures) == 1
    with pytest.raises(ValueError, match=rf"q must have shape \({model.nq},\)"):
        call(model, q[:-1], v)
    with pytest.raises(ValueError, match=r"q has a non-finite value \(nan\) at index \(9,\)"):
        call(model, np.where(np.arange(model.nq) == 9, np.nan, q), v)
    if function in ("inverse_dynamics", "forward_dynamics", "nonlinear_effects", "centroidal_momentum"):
        for short in (v[:0], v[:-1]):
            with pytest.raises(ValueError, match=rf"v must have shape \({model.nv},\)"):
                call(model, q, short)


def test_coupled_mimic_forward_dynamics_in_one_call_solves_the_dense_system():
    """The compiled path (M = L^T L along dof_parent) gives numpy's dense
    solve of M a = tau - h to rounding, the same numbers whatever array-like
    the inputs come as, and still names the joint of a singular M."""
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    assert model.has_coupled_joints
    rng = np.random.default_rng(29)
    for _ in range(20):
        q, v, tau = rng.uniform(-1, 1, model.nq), rng.normal(size=model.nv), rng.normal(size=model.nv)
        a = mbs.forward_dynamics(model, q, v, tau)
        dense = np.linalg.solve(mbs.mass_matrix(model, q), tau - mbs.nonlinear_effects(model, q, v))
        close(a, dense, 1e-12)
        np.testing.assert_array_equal(mbs.forward_dynamics(model, list(q), tuple(v), tau.astype(np.longdouble)), a)
        close(mbs.inverse_dynamics(model, q, v, a), tau, 1e-10)
    singular = mbs.Model.from_urdf_string(  # j2 moves a massless link; j3 follows j1
        '<robot name="r"><link name="a"/><link name="b"><inertial><mass value="1"/>'
        '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link><link name="c"/>'
        '<link name="d"/>'
        '<joint name="j1" type="continuous"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/></joint>'
        '<joint name="j2" type="continuous"><parent link="b"/><child link="c"/><axis xyz="0 0 1"/></joint>'
        '<joint name="j3" type="continuous"><parent link="b"/><child link="d"/><axis xyz="1 0 0"/>'
        '<mimic joint="j1"/></joint></robot>')
    assert singular.has_coupled_joints
    with pytest.raises(mbs.SingularMassMatrix, match="joint 'j2' moves no mass or inertia"):
        mbs.forward_dynamics(singular, np.zeros(2), np.zeros(2), np.ones(2))
