"""Higher-order kinematics and derivatives of the dynamics (Müller dynamics
§2, §6): frame jerks, the Christoffel Coriolis matrix, analytic derivatives of
inverse and forward dynamics, the torque rate and the linearised model.
Each against central differences of the lower order taken through
`integrate` (the tangent space), and against Pinocchio where it has the same
function."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest
from mbs_dynamics.algorithms.kinematics import REPRESENTATIONS
from mbs_dynamics.multibody.model import FLOATING
from mbs_dynamics.spatial.lie import ad

from helpers import chain, close, massless_chain_end
from oracles import Pair, random_state, robot_path


def models():
    """A floating humanoid, a fixed-base arm, and chains with prismatic, planar
    and mimic joints (coupled: one coordinate drives two joints)."""
    return {
        "talos": mbs.Model.from_urdf_file(robot_path("talos"), floating_base=True),
        "panda": mbs.Model.from_urdf_file(robot_path("panda")),
        "chain_coupled": chain("coupled"),
        "chain_independent": chain("independent"),
    }


MODELS = models()


def floating_blocks(model):
    return [slice(model.v_start[b], model.v_start[b] + 6) for b in np.flatnonzero(model.joint_type == FLOATING)]


def along(model, q, v, a, j, t):
    """(q, v, a) at time t of the trajectory through (q, v, a) with dv/dt = a + j t:
    q(t) = integrate(q, ξ(t)), ξ = v t + a t²/2 + c t³/6. A floating base's body
    twist is dexp_{-ξ}(dξ/dt) = v + a t + (c - [v, a]/2) t²/2 + O(t³), so its c is
    j + [v, a]/2; then q(t) is right to O(t⁴)."""
    c = j.copy()
    for block in floating_blocks(model):
        c[block] += 0.5 * ad(v[block]) @ a[block]
    return mbs.integrate(model, q, v * t + a * t**2 / 2 + c * t**3 / 6), v + a * t + j * t**2 / 2, a + j * t


def tangent_columns(f, model, q, h=1e-5):
    """Central differences of f(q) along each tangent direction, through integrate."""
    return np.column_stack([(f(mbs.integrate(model, q, h * e)) - f(mbs.integrate(model, q, -h * e))) / (2 * h)
                            for e in np.eye(model.nv)])


def vector_columns(f, x, h=1e-5):
    return np.column_stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


def frames_of(model):
    frames = {"talos": ["gripper_left_fingertip_1_link", "right_sole_link"],
              "panda": ["panda_hand", "panda_leftfinger"]}
    return frames.get(model.name, ["l3", "l5", "l6"])


# --- 1. frame jerk -----------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("representation", REPRESENTATIONS)
def test_frame_jerk_is_the_derivative_of_the_frame_acceleration(name, representation):
    """frame_acceleration = d/dt frame_velocity and frame_jerk = d/dt frame_acceleration
    along a trajectory, by central differences (O(h²))."""
    model = MODELS[name]
    rng = np.random.default_rng(1)
    h = 1e-4
    for _ in range(2):
        q, v, a = random_state(model, rng)
        j = rng.normal(size=model.nv)
        plus, minus = along(model, q, v, a, j, h), along(model, q, v, a, j, -h)
        for frame in frames_of(model):
            velocity = [mbs.frame_velocity(model, x[0], x[1], frame, representation) for x in (plus, minus)]
            acceleration = [mbs.frame_acceleration(model, *x, frame, representation) for x in (plus, minus)]
            close(mbs.frame_acceleration(model, q, v, a, frame, representation),
                  (velocity[0] - velocity[1]) / (2 * h), 1e-7)
            close(mbs.frame_jerk(model, q, v, a, j, frame, representation),
                  (acceleration[0] - acceleration[1]) / (2 * h), 1e-7)


def test_frame_jerk_is_linear_in_j_with_the_jacobian():
    """jerk(j) - jerk(0) = J j in every representation; mixed and hybrid share the linear part."""
    model = MODELS["talos"]
    q, v, a = random_state(model, np.random.default_rng(2))
    j = np.random.default_rng(3).normal(size=model.nv)
    frame = "gripper_left_fingertip_1_link"
    for representation in REPRESENTATIONS:
        J = mbs.frame_jacobian(model, q, frame, representation)
        difference = mbs.frame_jerk(model, q, v, a, j, frame, representation) - mbs.frame_jerk(
            model, q, v, a, 0 * j, frame, representation)
        close(difference, J @ j, 1e-12)
    close(mbs.frame_jerk(model, q, v, a, j, frame, "mixed")[3:], mbs.frame_jerk(model, q, v, a, j, frame, "hybrid")[3:],
          1e-14)


def test_frame_jerk_rejects_bad_input():
    model = MODELS["panda"]
    q, v, a = random_state(model, np.random.default_rng(4))
    with pytest.raises(ValueError, match="j"):
        mbs.frame_jerk(model, q, v, a, np.r_[np.nan, v[1:]], "panda_hand")
    with pytest.raises(ValueError, match="shape"):
        mbs.frame_jerk(model, q, v, a, v[:3], "panda_hand")
    with pytest.raises(ValueError, match="representation"):
        mbs.frame_jerk(model, q, v, a, v, "panda_hand", "local")
    np.testing.assert_array_equal(mbs.frame_jerk(model, q, v, a, v, model.frame_names[0]), np.zeros(6))


# --- 3. Coriolis matrix --------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_coriolis_matrix_gives_the_velocity_torques_and_a_skew_symmetric_mdot_minus_2c(name):
    model = MODELS[name]
    rng = np.random.default_rng(5)
    h = 1e-5
    for _ in range(2):
        q, v, _ = random_state(model, rng)
        C = mbs.coriolis_matrix(model, q, v)
        close(C @ v, mbs.nonlinear_effects(model, q, v) - mbs.gravity_torques(model, q), 1e-12)
        M_dot = (mbs.mass_matrix(model, mbs.integrate(model, q, h * v))
                 - mbs.mass_matrix(model, mbs.integrate(model, q, -h * v))) / (2 * h)
        N = M_dot - 2 * C
        close(N + N.T, np.zeros_like(N), 1e-8 * max(1.0, np.abs(M_dot).max()))  # O(h²) differences
        assert np.abs(N).max() > 1e-3 * np.abs(M_dot).max()  # skew, not zero


@pytest.mark.parametrize("name", ["panda", "chain_coupled", "chain_independent"])
def test_coriolis_matrix_is_made_of_christoffel_symbols(name):
    """Where v = dq/dt: C[i, j] = sum_k (dM_ij/dq_k + dM_ik/dq_j - dM_jk/dq_i) v_k / 2,
    with dM/dq by central differences of the CRBA."""
    model = MODELS[name]
    rng = np.random.default_rng(6)
    q, v, _ = random_state(model, rng)
    h = 1e-6
    dM = np.stack([(mbs.mass_matrix(model, q + h * e) - mbs.mass_matrix(model, q - h * e)) / (2 * h)
                   for e in np.eye(model.nq)], axis=2)  # dM[i, j, k] = dM_ij/dq_k
    christoffel = 0.5 * (dM + dM.transpose(0, 2, 1) - dM.transpose(2, 1, 0))
    close(mbs.coriolis_matrix(model, q, v), christoffel @ v, 1e-8)


def test_coriolis_matrix_matches_pinocchio():
    pair = Pair(robot_path("talos"), floating_base=True)
    pin, P = pair.pin, pair.P
    rng = np.random.default_rng(7)
    for _ in range(3):
        q, v, _ = pair.random_state(rng)
        C_pin = pin.computeCoriolisMatrix(pair.pin_model, pair.data, pair.q(q), pair.v(v))
        close(mbs.coriolis_matrix(pair.model, q, v), P @ C_pin @ P.T, 1e-10)


# --- 4. inverse and forward dynamics derivatives ------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_inverse_dynamics_derivatives_are_the_central_differences(name):
    model = MODELS[name]
    rng = np.random.default_rng(8)
    for _ in range(2):
        q, v, a = random_state(model, rng)
        dtau_dq, dtau_dv, dtau_da = mbs.inverse_dynamics_derivatives(model, q, v, a)
        close(dtau_dq, tangent_columns(lambda x, v=v, a=a: mbs.inverse_dynamics(model, x, v, a), model, q), 1e-8)
        close(dtau_dv, vector_columns(lambda x, q=q, a=a: mbs.inverse_dynamics(model, q, x, a), v), 1e-8)
        close(dtau_da, mbs.mass_matrix(model, q), 1e-13)


@pytest.mark.parametrize("name", ["talos", "solo12", "ur5"])
def test_inverse_and_forward_dynamics_derivatives_match_pinocchio(name):
    pair = Pair(robot_path(name), floating_base=name != "ur5")
    pin, pm, d, P = pair.pin, pair.pin_model, pair.data, pair.P
    rng = np.random.default_rng(9)
    for _ in range(3):
        q, v, a = pair.random_state(rng)
        qp, vp, ap = pair.q(q), pair.v(v), pair.v(a)
        dq, dv, da = pin.computeRNEADerivatives(pm, d, qp, vp, ap)
        ours = mbs.inverse_dynamics_derivatives(pair.model, q, v, a)
        for mine, theirs in zip(ours, (dq, dv, da), strict=True):
            close(mine, P @ theirs @ P.T, 1e-10)
        tau = a  # any torque
        dq, dv, dtau = pin.computeABADerivatives(pm, d, qp, vp, pair.v(tau))
        ours = mbs.forward_dynamics_derivatives(pair.model, q, v, tau)
        for mine, theirs in zip(ours, (dq, dv, dtau), strict=True):
            close(mine, P @ theirs @ P.T, 1e-9)


@pytest.mark.parametrize("name", MODELS)
def test_forward_dynamics_derivatives_are_the_central_differences(name):
    model = MODELS[name]
    rng = np.random.default_rng(10)
    q, v, tau = random_state(model, rng)
    da_dq, da_dv, da_dtau = mbs.forward_dynamics_derivatives(model, q, v, tau)
    close(da_dq, tangent_columns(lambda x: mbs.forward_dynamics(model, x, v, tau), model, q), 1e-7)
    close(da_dv, vector_columns(lambda x: mbs.forward_dynamics(model, q, x, tau), v), 1e-7)
    close(da_dtau @ mbs.mass_matrix(model, q), np.eye(model.nv), 1e-10)


# --- 5. the torque rate ---------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_torque_rate_is_the_derivative_of_inverse_dynamics_along_a_trajectory(name):
    model = MODELS[name]
    rng = np.random.default_rng(11)
    h = 1e-5
    for _ in range(2):
        q, v, a = random_state(model, rng)
        j = rng.normal(size=model.nv)
        tau_rate = mbs.inverse_dynamics_rate(model, q, v, a, j)
        plus, minus = along(model, q, v, a, j, h), along(model, q, v, a, j, -h)
        close(tau_rate, (mbs.inverse_dynamics(model, *plus) - mbs.inverse_dynamics(model, *minus)) / (2 * h), 1e-7)
        dtau_dq, dtau_dv, M = mbs.inverse_dynamics_derivatives(model, q, v, a)
        close(tau_rate, dtau_dq @ v + dtau_dv @ a + M @ j, 1e-12)


# --- 6. linearisation -------------------------------------------------------------------


def flow(model, q0, tau):
    """x = (δq, v) -> dx/dt = (dδq/dt, FD) in the chart q = integrate(q0, δq), the
    chart's rate by central differences of difference(q0, .) along the motion."""
    nv = model.nv

    def f(x):
        q = mbs.integrate(model, q0, x[:nv])
        v = x[nv:]
        h = 1e-5
        rate = (mbs.difference(model, q0, mbs.integrate(model, q, v, h))
                - mbs.difference(model, q0, mbs.integrate(model, q, v, -h))) / (2 * h)
        return np.r_[rate, mbs.forward_dynamics(model, q, v, tau)]
    return f


@pytest.mark.parametrize("name", ["solo12", "chain_coupled"])
def test_linearize_is_the_jacobian_of_the_state_space_flow(name):
    model = (mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True) if name == "solo12"
             else MODELS[name])
    rng = np.random.default_rng(12)
    q, v, tau = random_state(model, rng)
    A, B = mbs.linearize(model, q, v, tau)
    assert A.shape == (2 * model.nv, 2 * model.nv) and B.shape == (2 * model.nv, model.nv)
    x = np.r_[np.zeros(model.nv), v]
    close(A, vector_columns(flow(model, q, tau), x, 1e-4), 1e-6)
    da_dtau = vector_columns(lambda u: mbs.forward_dynamics(model, q, v, u), tau)
    close(B, np.r_[np.zeros((model.nv, model.nv)), da_dtau], 1e-7)


# --- bad input -----------------------------------------------------------------------------


def test_derivatives_reject_bad_input():
    model = MODELS["talos"]
    q, v, a = random_state(model, np.random.default_rng(13))
    bad = v.copy()
    bad[3] = np.nan
    for call in (lambda: mbs.inverse_dynamics_derivatives(model, q, bad, a),
                 lambda: mbs.forward_dynamics_derivatives(model, q, v, bad),
                 lambda: mbs.coriolis_matrix(model, q, bad),
                 lambda: mbs.inverse_dynamics_rate(model, q, v, a, bad),
                 lambda: mbs.linearize(model, q, bad, a)):
        with pytest.raises(ValueError, match="finite|NaN"):
            call()
    unnormalised = q.copy()
    unnormalised[3:7] *= 2
    with pytest.raises(ValueError, match="quaternion"):
        mbs.inverse_dynamics_derivatives(model, unnormalised, v, a)
    with pytest.raises(ValueError, match="shape"):
        mbs.coriolis_matrix(model, q, v[:5])


def test_a_singular_mass_matrix_is_reported_by_name():
    model = massless_chain_end()
    for call in (mbs.forward_dynamics_derivatives, mbs.linearize):
        with pytest.raises(mbs.SingularMassMatrix, match="'j2'"):
            call(model, np.zeros(2), np.zeros(2), np.ones(2))
    dtau_dq, dtau_dv, M = mbs.inverse_dynamics_derivatives(model, np.zeros(2), np.ones(2), np.ones(2))
    assert np.all(np.isfinite(dtau_dq)) and M[1, 1] == 0.0  # inverse dynamics needs no inverse


def test_a_model_without_coordinates_has_empty_derivatives():
    """Fixed joints only (no bodies after merging): empty matrices, one state or a batch."""
    model = mbs.Model.from_urdf_string(
        '<robot name="r"><link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" '
        'ixz="0" iyz="0"/></inertial></link><link name="b"/><joint name="j" type="fixed"><parent link="a"/>'
        '<child link="b"/></joint></robot>')
    assert model.nv == 0
    for matrix in (*mbs.forward_dynamics_derivatives(model, [], [], []), *mbs.linearize(model, [], [], [])):
        assert matrix.shape == (0, 0)
    A, B = mbs.linearize(model, np.zeros((3, 0)), np.zeros((3, 0)), np.zeros((3, 0)))
    assert A.shape == (3, 0, 0) and B.shape == (3, 0, 0)


@pytest.mark.parametrize("name", ["talos", "chain_coupled"])
def test_batches_of_derivatives_equal_one_state_at_a_time(name):
    """A horizon of states, as MPC linearises it: every batched result is the single-state one."""
    model = MODELS[name]
    rng = np.random.default_rng(14)
    q, v, u = (np.array(x) for x in zip(*[random_state(model, rng) for _ in range(5)], strict=True))
    batched = (mbs.inverse_dynamics_derivatives(model, q, v, u), mbs.forward_dynamics_derivatives(model, q, v, u),
               mbs.linearize(model, q, v, u))
    for k in range(5):
        single = (mbs.inverse_dynamics_derivatives(model, q[k], v[k], u[k]),
                  mbs.forward_dynamics_derivatives(model, q[k], v[k], u[k]), mbs.linearize(model, q[k], v[k], u[k]))
        for many, one in zip(batched, single, strict=True):
            for x, y in zip(many, one, strict=True):
                close(x[k], y, 1e-13)
    bad = v.copy()
    bad[3, 2] = np.inf
    for call in (mbs.inverse_dynamics_derivatives, mbs.forward_dynamics_derivatives, mbs.linearize):
        with pytest.raises(ValueError, match="finite"):
            call(model, q, bad, u)
    with pytest.raises(ValueError, match="same leading size"):
        mbs.linearize(model, q, v[:4], u)
