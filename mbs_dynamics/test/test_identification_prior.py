"""Identification's prior: the entropic divergence of pseudo-inertias (Lee,
Wensing & Park 2020) as residuals with an analytic Jacobian, and what it does
on a Panda (fingers fixed to the hand) simulated from a perturbed model whose
first link is 0.6 times the URDF's: what the torques cannot see (that link's
mass) stays at the URDF's, while every identifiable combination fits as well
as the data allow."""
from __future__ import annotations

import numpy as np
import pytest
from mbs_dynamics.identification import estimation as est
from mbs_dynamics.identification.base_parameters import base_parameters, random_states
from mbs_dynamics.identification.data import Recording, write_csv
from mbs_dynamics.identification.excitation import optimise_excitation
from mbs_dynamics.identification.identify import identify
from mbs_dynamics.identification.parameters import ParameterLayout
from oracles import robot_path
from test_identification import perturbed_robot

import mbs_dynamics as mbs

FIRST_LINK_SCALE = 0.6  # the true first link's pseudo-inertia (mass and inertia) over the URDF's
NOISE = 0.01  # of each joint's torque RMS
RATE = 500.0


def test_divergence_is_a_sum_of_squares_with_an_analytic_jacobian():
    """The residuals' squares add up to -log det(J0^-1 J) + tr(J0^-1 J) - 4, and
    their Jacobian matches central differences: at random bodies, at the prior
    itself (u = 0, where g = sign(u) sqrt(e^2u - 1 - 2u) is taken from its
    series) and on both sides of the switch between series and closed form."""
    rng = np.random.default_rng(3)
    theta0 = rng.normal(size=(6, 10)) * 0.5
    theta = theta0 + rng.normal(size=(6, 10)) * 0.5
    theta[1] = theta0[1]  # the prior itself
    for row, u in zip((2, 3, 4, 5), (0.1 - 1e-9, 0.1 + 1e-9, -0.1 + 1e-9, -0.1 - 1e-9), strict=True):
        theta[row, :4] = theta0[row, :4] + [u, 0.0, 0.0, 0.0]  # u_4 = alpha - alpha0 = u, u_1..3 = u too
    residuals, jacobian = est.divergence_residuals(theta, theta0)
    U, U0 = est.cholesky_factor(theta), est.cholesky_factor(theta0)
    divergence = est.entropic_divergence(U @ np.swapaxes(U, -1, -2), U0 @ np.swapaxes(U0, -1, -2))
    assert np.allclose(np.sum(residuals**2, axis=-1), divergence, rtol=1e-10, atol=1e-14)
    assert np.all(divergence[[0, 2, 3, 4, 5]] > 0.0) and divergence[1] == pytest.approx(0.0, abs=1e-14)
    assert np.allclose(residuals[1], 0.0, atol=1e-14)
    step = 1e-6
    for k in range(10):
        d = np.zeros(10)
        d[k] = step
        numeric = (est.divergence_residuals(theta + d, theta0)[0] - est.divergence_residuals(theta - d, theta0)[0]) \
            / (2 * step)
        assert np.allclose(jacobian[..., k], numeric, rtol=1e-6, atol=1e-7), k


def test_divergence_is_free_of_units_and_frames():
    """d(J || J0) is unchanged when both bodies are described in another frame
    (J -> A J A^T, A a rigid motion) or other units (lengths scaled), and is
    2 e^2 to second order for a body scaled by 1 + e: what a unit of
    prior_weight buys."""
    rng = np.random.default_rng(4)
    theta, theta0 = rng.normal(size=(2, 10)) * 0.4
    U, U0 = est.cholesky_factor(theta), est.cholesky_factor(theta0)
    J, J0 = U @ U.T, U0 @ U0.T
    rotation = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    A = np.eye(4)
    A[:3, :3], A[:3, 3] = 2.5 * rotation, rng.normal(size=3)  # a rigid motion, lengths in other units
    assert est.entropic_divergence(A @ J @ A.T, A @ J0 @ A.T) == pytest.approx(est.entropic_divergence(J, J0),
                                                                               rel=1e-9)
    assert est.entropic_divergence(1.01 * J0, J0) == pytest.approx(2 * 0.01**2, rel=2e-2)


def test_fit_jacobian_matches_finite_differences():
    """The whole residual of the fit (data, divergence of each body, joint
    parameters), its analytic Jacobian against central differences away from the
    prior."""
    layout = ParameterLayout(mbs.Model.from_urdf_file(robot_path("ur5")))
    rng = np.random.default_rng(2)
    q, v, a = random_states(layout.model, 200, rng)
    tau = layout.regressor(q, v, a) @ perturbed_robot(layout, rng)
    scale = np.sqrt(np.mean(tau[:, layout.joint_coordinates()] ** 2, axis=0))
    equations = est.normal_equations(layout, q, v, a, tau, 1 / scale**2).mean()
    problem = est._Problem(layout, equations, None, 1e-2, scale)
    x = problem.x0 + 0.1 * rng.normal(size=problem.x0.size)
    analytic = problem.jacobian(x)
    step = 1e-6
    numeric = np.column_stack([(problem.residual(x + step * e) - problem.residual(x - step * e)) / (2 * step)
                               for e in np.eye(x.size)])
    assert analytic.shape == numeric.shape
    assert np.allclose(analytic, numeric, rtol=1e-6, atol=1e-6 * np.abs(analytic).max())


def panda_fingers_fixed() -> str:
    """The Panda's URDF with both finger joints fixed: the hand and fingers are one body with link 7."""
    with open(robot_path("panda"), encoding="utf-8") as file:
        xml = file.read()
    for joint in ("panda_finger_joint1", "panda_finger_joint2"):
        xml = xml.replace(f'<joint name="{joint}" type="prismatic">', f'<joint name="{joint}" type="fixed">')
    return xml


@pytest.fixture(scope="module")
def panda_run():
    """The Panda (fingers fixed), its true parameters in the layout of every
    joint parameter (every body's mass and inertia scaled by 0.6-1.4 and its
    mass moved by up to 3 cm, friction, damping, armature; the first link's
    pseudo-inertia FIRST_LINK_SCALE times the URDF's), and two periods of an
    excitation trajectory at RATE."""
    xml = panda_fingers_fixed()
    model = mbs.Model.from_urdf_string(xml)
    full = ParameterLayout(model)
    p_true = perturbed_robot(full, np.random.default_rng(5))
    full.body_parameters(p_true)[0] = FIRST_LINK_SCALE * full.body_parameters(full.nominal())[0]
    excitation = optimise_excitation(model, layout=full, seed=1, max_iterations=10)
    t = np.arange(0.0, 2 * excitation.period, 1 / RATE)
    return xml, model, full, p_true, t, excitation.sample(t)


def true_run(panda_run, layout: ParameterLayout) -> tuple[np.ndarray, np.ndarray]:
    """The true parameters in layout (no armature if it has none) and the true
    robot's torques plus NOISE times their RMS."""
    _, _, full, p_true, _, (q, v, a) = panda_run
    if "armature" not in layout.joint_parameters:
        p_true = np.delete(p_true, full.joint_columns("armature"))
    effort = layout.regressor(q, v, a) @ p_true
    rms = np.sqrt(np.mean(effort**2, axis=0))
    return p_true, effort + NOISE * rms * np.random.default_rng(7).normal(size=effort.shape)


@pytest.mark.parametrize("joint_parameters", [("friction", "damping", "armature"), ("friction", "damping")])
def test_unseen_mass_stays_and_identifiable_combinations_fit(panda_run, joint_parameters):
    """(a) The first link's mass shows in no torque (its joint's axis is
    vertical: only its inertia about the axis does); the true one 0.6 times the
    URDF's, it stays within 1 % of the URDF's, and the link's J^-1 moves only
    in the direction the torques see (the earlier prior, quadratic in
    log-Cholesky coordinates, moved the mass by 2.7 % here without the
    armature). (b) The fit's RMS torque error is within 3 % of the data's
    least-squares minimum (no prior, no consistency: no parameters fit them
    better), and every base parameter is within 1 % of a torque RMS of the
    truth (its error times the RMS torque a unit of it makes). (c) Every
    pseudo-inertia is positive definite, well inside."""
    _, model, _, _, _, (q, v, a) = panda_run
    layout = ParameterLayout(model, joint_parameters)
    p_true, effort = true_run(panda_run, layout)
    rows = layout.joint_coordinates()
    scale = np.sqrt(np.mean(effort[:, rows] ** 2, axis=0))
    equations = est.normal_equations(layout, q, v, a, effort, 1 / scale**2).mean()
    fit = est.fit(layout, equations, torque_scale=scale)
    nominal = layout.nominal()
    bodies, nominal_bodies = layout.body_parameters(fit.parameters), layout.body_parameters(nominal)

    # (a) the first link: only I_zz has a nonzero column, its mass is no base parameter
    base = base_parameters(layout)
    Y = layout.regressor(q[::10], v[::10], a[::10])[:, rows]  # the first body's columns are the first 10
    assert np.all(Y[..., :9] == 0.0) and np.any(Y[..., 9] != 0.0)
    assert not base.identifiable()[0]
    assert abs(layout.body_parameters(p_true)[0, 0] / nominal_bodies[0, 0] - 1) > 0.3
    assert bodies[0, 0] == pytest.approx(nominal_bodies[0, 0], rel=1e-2)
    change = np.linalg.inv(est.pseudo_inertia(bodies[0])) - np.linalg.inv(est.pseudo_inertia(nominal_bodies[0]))
    seen = np.diag([1.0, 1.0, 0.0, 0.0])  # I_zz = Sigma_xx + Sigma_yy = tr(seen J)
    along = np.sum(change * seen) / 2.0
    assert np.abs(change - along * seen).max() < 1e-4 * abs(along)
    print(f"\n{', '.join(joint_parameters)}: masses (kg) nominal {np.round(nominal_bodies[:, 0], 3)} total "
          f"{nominal_bodies[:, 0].sum():.3f}, true {np.round(layout.body_parameters(p_true)[:, 0], 3)} total "
          f"{layout.body_parameters(p_true)[:, 0].sum():.3f}, identified {np.round(bodies[:, 0], 3)} total "
          f"{bodies[:, 0].sum():.3f}")

    # (b) the identifiable combinations
    independent = base.independent
    A = equations.normal_matrix[np.ix_(independent, independent)]
    least_squares = np.zeros(layout.size)
    least_squares[independent] = np.linalg.solve(A, equations.moment[independent])
    assert fit.cost >= equations.cost(least_squares) * (1 - 1e-9)
    assert np.sqrt(fit.cost / equations.cost(least_squares)) < 1.03
    errors = np.abs(base.values(fit.parameters) - base.values(p_true)) * np.sqrt(np.diag(A))
    assert errors.max() < 1e-2
    print(f"RMS torque error over the least-squares minimum's {np.sqrt(fit.cost / equations.cost(least_squares)):.4f}, "
          f"base parameters' largest error {100 * errors.max():.3f} % of a torque RMS")

    # (c) consistent, well inside
    J = est.pseudo_inertia(bodies)
    assert np.all(np.linalg.eigvalsh(J)[:, 0] > 1e-3 * np.linalg.eigvalsh(est.pseudo_inertia(nominal_bodies))[:, 0])


def test_identify_keeps_the_unseen_mass_of_a_panda(panda_run, tmp_path):
    """The route a user takes (identify: a CSV file read, filtered, reduced to
    normal equations on Dask, fitted at the default prior weight): the first
    link's mass stays within 1 % of the URDF's 4.97 kg (a user's log with the
    earlier prior took it to 3.23 kg), and every joint's torque is predicted to
    the noise (1 % of its RMS), the nominal URDF's error being 4-99 %."""
    xml, model, full, _, t, (q, v, _) = panda_run
    effort = true_run(panda_run, full)[1]
    path = write_csv(tmp_path / "panda.csv", Recording(tuple(model.joint_names), t, position=q, velocity=v,
                                                       effort=effort))
    result = identify([str(path)], xml, progress=False)
    masses, nominal = (result.layout.body_parameters(p)[:, 0] for p in (result.identified, result.nominal))
    assert masses[0] == pytest.approx(nominal[0], rel=1e-2)
    assert est.physically_consistent(result.layout.body_parameters(result.identified)).all()
    for report in result.joints:
        assert report.identified_rms_error < 1.1 * NOISE * report.torque_rms, report
        assert report.nominal_rms_error > 3 * NOISE * report.torque_rms, report
    print(f"\nidentify: total mass {nominal.sum():.2f} -> {masses.sum():.2f} kg, first link {nominal[0]:.3f} -> "
          f"{masses[0]:.3f} kg, last (hand) {nominal[-1]:.3f} -> {masses[-1]:.3f} kg")
