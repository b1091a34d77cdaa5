"""Identification: the log-Cholesky parametrisation, base parameters, the fit,
the identified URDF, and the whole route from a robot simulated in our
simulator to a bag to mbs_dynamics_identify to an identified URDF that
predicts a held-out run."""
from __future__ import annotations

import numpy as np
import pytest
from mbs_dynamics.command_line import EXIT_BAD_DATA
from mbs_dynamics.identification import cli, data
from mbs_dynamics.identification import estimation as est
from mbs_dynamics.identification.base_parameters import base_parameters, random_states
from mbs_dynamics.identification.excitation import optimise_excitation
from mbs_dynamics.identification.identify import identify
from mbs_dynamics.identification.parameters import ParameterLayout
from mbs_dynamics.identification.urdf_writer import identified_urdf
from oracles import robot_path

import mbs_dynamics as mbs


def ur5_xml() -> str:
    with open(robot_path("ur5"), encoding="utf-8") as file:
        return file.read()


def perturbed_robot(layout: ParameterLayout, rng) -> np.ndarray:
    """A 'true' robot near the layout's nominal one: each body's mass and
    inertia scaled by 0.6-1.4 and its mass moved by up to 3 cm (J -> s A J A^T,
    physically consistent by construction), friction, damping and armature added."""
    p = layout.nominal()
    bodies = layout.body_parameters(p)
    for k in np.flatnonzero(bodies[:, 0] > 0):
        A = np.eye(4)
        A[:3, 3] = rng.uniform(-0.03, 0.03, 3)
        bodies[k] = est.inertial_parameters_of(rng.uniform(0.6, 1.4) * A @ est.pseudo_inertia(bodies[k]) @ A.T)
    joints = len(layout.actuated_joints)
    for name, low, high in (("friction", 0.3, 1.5), ("damping", 0.2, 1.5), ("armature", 0.05, 0.3)):
        p[layout.joint_columns(name)] = rng.uniform(low, high, joints)
    return p


def test_log_cholesky_round_trip_and_jacobian():
    rng = np.random.default_rng(1)
    theta = rng.normal(size=(4, 10)) * 0.5
    parameters, jacobian = est.parameters_and_jacobian(theta)
    assert est.physically_consistent(parameters).all()
    J = est.pseudo_inertia(parameters)
    assert np.allclose(est.log_cholesky(J), theta, atol=1e-12)
    assert np.allclose(est.inertial_parameters_of(J), parameters, atol=1e-14)
    step = 1e-6
    for k in range(10):
        d = np.zeros(10)
        d[k] = step
        numeric = (est.parameters_and_jacobian(theta + d)[0] - est.parameters_and_jacobian(theta - d)[0]) / (2 * step)
        assert np.allclose(jacobian[:, :, k], numeric, atol=1e-7)


def test_physical_consistency_is_the_triangle_inequality():
    """A rod of 1 kg, 1 m along x about its centre: principal moments (0, 1/12, 1/12) sit on
    the boundary; moving a moment below the sum of the others breaks it."""
    rod = np.array([1.0, 0, 0, 0, 1e-6, 0, 1 / 12, 0, 0, 1 / 12])
    assert est.physically_consistent(rod)
    broken = rod.copy()
    broken[4] = 1 / 12 + 1 / 12 + 0.01  # I_xx > I_yy + I_zz
    assert not est.physically_consistent(broken)
    assert not est.physically_consistent(np.r_[-1.0, rod[1:]])


@pytest.mark.parametrize("robot, floating_base", [("ur5", False), ("talos", True)])
def test_base_parameters_carry_every_torque(robot, floating_base):
    layout = ParameterLayout(mbs.Model.from_urdf_file(robot_path(robot), floating_base=floating_base))
    base = base_parameters(layout)
    assert 0 < base.independent.size < layout.size
    assert np.array_equal(np.sort(np.concatenate([base.independent, base.dependent])), np.arange(layout.size))
    # the torques that are measured: the actuated joints' (not a floating base's wrench)
    Y = layout.regressor(*random_states(layout.model, 20, np.random.default_rng(4)))[:, layout.joint_coordinates()]
    p = np.random.default_rng(2).normal(size=layout.size)
    assert np.allclose(Y @ p, Y[..., base.independent] @ base.values(p), atol=1e-9 * np.abs(Y @ p).max())
    # the first joint of a fixed-base arm never feels the first body's mass: not a base parameter
    if not floating_base:
        assert not base.identifiable()[0]


def test_fit_recovers_a_perturbed_ur5_from_exact_data_and_keeps_what_data_cannot_see():
    layout = ParameterLayout(mbs.Model.from_urdf_string(ur5_xml()))
    rng = np.random.default_rng(0)
    p_true = perturbed_robot(layout, rng)
    q, v, a = random_states(layout.model, 2000, rng)
    tau = layout.regressor(q, v, a) @ p_true
    rows = layout.joint_coordinates()
    scale = np.sqrt(np.mean(tau[:, rows] ** 2, axis=0))
    equations = est.normal_equations(layout, q, v, a, tau, 1 / scale**2).mean()
    fit = est.fit(layout, equations, torque_scale=scale)
    assert est.physically_consistent(layout.body_parameters(fit.parameters)[fit.identified_bodies]).all()
    q2, v2, a2 = random_states(layout.model, 300, np.random.default_rng(9))
    Y = layout.regressor(q2, v2, a2)[:, rows]
    truth = Y @ p_true
    relative = np.sqrt(np.mean((Y @ fit.parameters - truth) ** 2) / np.mean(truth**2))
    nominal = np.sqrt(np.mean((Y @ layout.nominal() - truth) ** 2) / np.mean(truth**2))
    assert relative < 2e-3
    assert nominal > 0.1
    assert fit.cost < 1e-3 * fit.nominal_cost
    # the first link's mass shows in no torque: it stays at the URDF's value, where the true one is
    # 0.6-1.4 times it (the prior's divergence moves the link's J^-1 only along its inertia about the
    # axis, which leaves the mass alone when the centre of mass is on the axis, as here)
    assert fit.parameters[0] == pytest.approx(layout.nominal()[0], rel=1e-6)
    assert abs(p_true[0] / layout.nominal()[0] - 1) > 0.05


def test_identified_urdf_loads_as_the_identified_parameters():
    xml = ur5_xml()
    layout = ParameterLayout(mbs.Model.from_urdf_string(xml))
    p = perturbed_robot(layout, np.random.default_rng(3))
    bodies = np.flatnonzero(layout.body_parameters(p)[:, 0] > 0)
    text = identified_urdf(xml, layout, p, bodies, comment="test")
    assert "<!-- test -->" in text and 'xmlns:drake="http://drake.mit.edu"' in text
    again = ParameterLayout(mbs.Model.from_urdf_string(text))
    assert again.joint_parameters == ("friction", "damping", "armature")
    assert np.allclose(again.nominal(), p, rtol=1e-12, atol=1e-15)
    # the UR5's own transmissions got the rotor inertia; none was added
    assert text.count("<transmission") == ur5_xml().count("<transmission")


def smooth_trajectory(model, seed: int, duration: float, rate: float = 500.0):
    """q, v, a of a sum of sines (periods 10 s / l, l = 1..5) per joint around
    the neutral pose, amplitudes falling with l."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, duration, 1.0 / rate)
    w = 2 * np.pi / 10.0 * np.arange(1, 6)
    amplitude = rng.uniform(-1, 1, (model.nv, 5)) * 0.6 / np.arange(1, 6)
    phase = rng.uniform(0, 2 * np.pi, (model.nv, 5))
    angle = w * t[:, None, None] + phase
    q = np.sum(amplitude * np.sin(angle), axis=-1)
    v = np.sum(amplitude * w * np.cos(angle), axis=-1)
    a = -np.sum(amplitude * w**2 * np.sin(angle), axis=-1)
    return t, q, v, a


def simulated_run(true_model, nominal_model, reference, gains=(400.0, 40.0)) -> data.Recording:
    """The true robot in our simulator (exact Coulomb friction, implicit damping,
    armature) following the reference (t, q, v, a at 1 kHz) under
    computed-torque control on the nominal model, recorded at 500 Hz: joint
    positions, velocities and the efforts applied."""
    kp, kd = gains
    t, q_ref, v_ref, a_ref = reference
    simulation = mbs.Simulation(true_model, mbs.World(ground=None), dt=1e-3, q=q_ref[0], v=v_ref[0])
    samples = {"position": [], "velocity": [], "effort": []}
    for k in range(len(t)):
        q, v = simulation.q, simulation.v
        a = a_ref[k] + kd * (v_ref[k] - v) + kp * (q_ref[k] - q)
        tau = mbs.inverse_dynamics(nominal_model, q, v, a)
        if k % 2 == 0:
            for name, value in (("position", q), ("velocity", v), ("effort", tau)):
                samples[name].append(value.copy())
        simulation.step(tau)
    return data.Recording(tuple(nominal_model.joint_names), t[::2], **{k: np.array(x) for k, x in samples.items()})


def predicted_error(model, recording: data.Recording) -> float:
    """RMS error of the model's torques (inverse dynamics and joint friction)
    on a recorded run, relative to the RMS of the recorded torques, over the
    samples where the joint moves (est.STICKING_VELOCITIES): a sticking
    joint's friction is set-valued, which no model predicts from the motion."""
    recording = data.filtered(recording, filter_effort=False).window(0.5, recording.duration - 0.5)
    q, v, a, tau = data.model_state(model, recording)
    predicted = mbs.inverse_dynamics(model, q, v, a) + mbs.joint_friction_torques(model, v)
    moving = np.abs(v) >= est.STICKING_VELOCITIES * mbs.algorithms.joint_friction.SMOOTHING_VELOCITY
    return float(np.sqrt(np.sum(moving * (predicted - tau) ** 2) / np.sum(moving * tau**2)))


@pytest.fixture(scope="module")
def ur5_runs(tmp_path_factory):
    """The true UR5 (nominal URDF off by 20-40 %, with friction and armature) and
    three simulated runs: two along excitation trajectories to identify from,
    written as MCAP and sqlite3 bags, and a held-out one along sums of sines."""
    directory = tmp_path_factory.mktemp("identification")
    nominal_xml = ur5_xml()
    nominal = mbs.Model.from_urdf_string(nominal_xml)
    layout = ParameterLayout(nominal)
    p_true = perturbed_robot(layout, np.random.default_rng(5))
    true_xml = identified_urdf(nominal_xml, layout, p_true, np.flatnonzero(nominal.mass > 0))
    true = mbs.Model.from_urdf_string(true_xml)
    t = np.arange(0.0, 30.0, 1e-3)
    excitations = [(t, *optimise_excitation(nominal, layout=layout, seed=seed, max_iterations=20).sample(t))
                   for seed in (1, 2)]
    held_out = smooth_trajectory(nominal, 3, 20.0, rate=1000.0)
    runs = [simulated_run(true, nominal, reference) for reference in (*excitations, held_out)]
    bags = [data.write_bag(directory / "run_mcap", runs[0], storage="mcap"),
            data.write_bag(directory / "run_sqlite3", runs[1], storage="sqlite3")]
    (directory / "nominal.urdf").write_text(nominal_xml)
    return directory, bags, runs[2], true, nominal


def test_identify_from_simulated_bags_predicts_a_held_out_run(ur5_runs, capsys):
    """Issue 19's end-to-end check: from bags of the true robot and the nominal
    URDF, mbs_dynamics_identify writes a URDF whose dynamics predict a
    held-out run within 3 % RMS, where the nominal URDF does not."""
    directory, bags, held_out, _, nominal = ur5_runs
    output = directory / "identified.urdf"
    status = cli.main([str(bag) for bag in bags] + ["--urdf", str(directory / "nominal.urdf"), "--output",
                                                    str(output), "--report", str(directory / "report.svg"), "--quiet"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    identified = mbs.Model.from_urdf_file(output)
    assert predicted_error(identified, held_out) < 0.03
    assert predicted_error(nominal, held_out) > 0.1
    layout = ParameterLayout(identified)
    assert est.physically_consistent(layout.body_parameters(layout.nominal())[identified.mass > 0]).all()
    assert "shoulder_lift_joint" in printed and "condition number" in printed
    assert (directory / "report.svg").read_text().count("<polyline") >= 3 * len(layout.actuated_joints)


def test_identify_with_noisy_efforts(ur5_runs, tmp_path):
    """Efforts with 1 % RMS noise: the identified prediction stays within 5 %."""
    directory, bags, held_out, _, _ = ur5_runs
    run = data.read_bag(bags[0], progress=False)
    rng = np.random.default_rng(8)
    noisy = run.replace(effort=run.effort + 0.01 * np.sqrt(np.mean(run.effort**2, axis=0)) * rng.normal(
        size=run.effort.shape))
    bag = data.write_bag(tmp_path / "noisy", noisy)
    result = identify([bag], (directory / "nominal.urdf").read_text(), progress=False)
    text = identified_urdf((directory / "nominal.urdf").read_text(), result.layout, result.identified,
                           result.fit.identified_bodies)
    assert predicted_error(mbs.Model.from_urdf_string(text), held_out) < 0.05


def test_identify_on_a_dask_cluster_equals_local_threads(ur5_runs):
    distributed = pytest.importorskip("distributed")
    directory, bags, _, _, _ = ur5_runs
    xml = (directory / "nominal.urdf").read_text()
    local = identify(bags, xml, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) \
            as cluster:
        remote = identify(bags, xml, scheduler=cluster.scheduler_address, progress=False)
    assert np.allclose(remote.identified, local.identified, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("change, message", [
    (lambda run: run.replace(effort=None), "no efforts"),
    (lambda run: run.replace(joint_names=("x",) + run.joint_names[1:]), "shoulder_pan_joint"),
    (lambda run: run.replace(position=run.position * [0, 1, 1, 1, 1, 1], velocity=run.velocity * [0, 1, 1, 1, 1, 1]),
     "too little excitation"),
])
def test_bad_input_gets_one_clear_message(ur5_runs, tmp_path, capsys, change, message):
    directory, bags, _, _, _ = ur5_runs
    bag = data.write_bag(tmp_path / "bad", change(data.read_bag(bags[0], progress=False)))
    status = cli.main([str(bag), "--urdf", str(directory / "nominal.urdf"), "--output", str(tmp_path / "x.urdf"),
                       "--quiet"])
    error = capsys.readouterr().err
    assert status == EXIT_BAD_DATA
    assert message in error and "Traceback" not in error
    assert not (tmp_path / "x.urdf").exists()


def test_no_such_topic(ur5_runs, tmp_path, capsys):
    directory, bags, _, _, _ = ur5_runs
    status = cli.main([str(bags[0]), "--topic", "robot/joint_states_nope", "--urdf", str(directory / "nominal.urdf"),
                       "--output", str(tmp_path / "x.urdf"), "--quiet"])
    error = capsys.readouterr().err
    assert status == EXIT_BAD_DATA and "joint_states_nope" in error and "/joint_states" in error


def test_random_states_respect_the_joint_limits():
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    q, _, _ = random_states(model, 200, np.random.default_rng(1))
    assert np.all(q >= model.lower_position_limit) and np.all(q <= model.upper_position_limit)
    span = np.minimum(model.upper_position_limit, np.pi) - np.maximum(model.lower_position_limit, -np.pi)
    assert np.all(np.ptp(q, axis=0) > 0.9 * span)  # and spread over them


def test_identify_a_floating_base_robot_from_joint_states_and_odometry(tmp_path):
    """Solo-12 with its base turning about z and moving (odometry: pose and
    child-frame twist) and its legs swinging: the torques of a perturbed Solo
    on the joints, read back from a bag with both topics, identify a model
    that predicts them far better than the nominal one. (The base turns about z
    only, which leaves a hip's armature and the inertia of its link about the
    hip axis indistinguishable: both see the hip's acceleration alone. So the
    armature is not fitted here, as mbs_dynamics_identify would demand.)"""
    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
    layout = ParameterLayout(model, ("friction", "damping"))
    p_true = perturbed_robot(ParameterLayout(model), np.random.default_rng(6))
    p_true = np.delete(p_true, ParameterLayout(model).joint_columns("armature"))
    t, joints_q, joints_v, joints_a = smooth_trajectory(model, 4, 30.0)
    joints = slice(6, None)
    # the base: p = (0.1 sin t, 0.05 cos 2t, 0.3), R = Rz(psi), psi = 0.5 sin(0.7 t)
    p, dp, ddp = (np.column_stack([f(t) for f in fs]) for fs in (
        (lambda t: 0.1 * np.sin(t), lambda t: 0.05 * np.cos(2 * t), lambda t: 0.3 + 0 * t),
        (lambda t: 0.1 * np.cos(t), lambda t: -0.1 * np.sin(2 * t), lambda t: 0 * t),
        (lambda t: -0.1 * np.sin(t), lambda t: -0.2 * np.cos(2 * t), lambda t: 0 * t)))
    psi, dpsi, ddpsi = 0.5 * np.sin(0.7 * t), 0.35 * np.cos(0.7 * t), -0.245 * np.sin(0.7 * t)
    c, s = np.cos(psi), np.sin(psi)
    R_T = np.stack([np.stack([c, s, 0 * c], -1), np.stack([-s, c, 0 * c], -1), np.tile([0.0, 0, 1], (len(t), 1))], 1)
    omega = np.column_stack([0 * t, 0 * t, dpsi])
    linear = np.einsum("nij,nj->ni", R_T, dp)
    linear_rate = np.einsum("nij,nj->ni", R_T, ddp) - np.cross(omega, linear)
    q = np.column_stack([p, 0 * t, 0 * t, np.sin(psi / 2), np.cos(psi / 2), joints_q[:, joints]])
    v = np.column_stack([omega, linear, joints_v[:, joints]])
    a = np.column_stack([0 * t, 0 * t, ddpsi, linear_rate, joints_a[:, joints]])
    effort = layout.regressor(q, v, a) @ p_true
    names = tuple(name for name in model.joint_names if name != "root_joint")
    recording = data.Recording(names, t, position=q[:, 7:], velocity=v[:, 6:], effort=effort[:, 6:],
                               base_position=p, base_orientation=q[:, 3:7], base_linear_velocity=linear,
                               base_angular_velocity=omega)
    bag = data.write_bag(tmp_path / "solo", recording, odometry_topic="odom")
    arguments = [str(bag), "--urdf", robot_path("solo12"), "--floating-base", "--output", str(tmp_path / "solo.urdf"),
                 "--quiet"]
    assert cli.main(arguments) == EXIT_BAD_DATA  # with the armature: too little excitation
    assert cli.main([*arguments, "--joint-parameters", "friction,damping"]) == 0
    identified = ParameterLayout(mbs.Model.from_urdf_file(tmp_path / "solo.urdf", floating_base=True),
                                 ("friction", "damping"))
    rows = layout.joint_coordinates()
    Y = layout.regressor(q[::5], v[::5], a[::5])[:, rows]
    truth = Y @ p_true
    error = np.sqrt(np.mean((Y @ identified.nominal() - truth) ** 2) / np.mean(truth**2))
    nominal_error = np.sqrt(np.mean((Y @ layout.nominal() - truth) ** 2) / np.mean(truth**2))
    assert error < 0.03
    assert nominal_error > 0.1


def test_robust_identification_shrugs_off_outliers(ur5_runs, tmp_path):
    """2 % of the samples carry torque spikes of 3 times the joint's RMS (a
    glitching sensor): least squares follows them, Huber's reweighting does not."""
    directory, bags, held_out, _, _ = ur5_runs
    run = data.read_bag(bags[0], progress=False)
    rng = np.random.default_rng(9)
    spikes = (rng.random(run.effort.shape) < 0.02) * rng.choice([-3.0, 3.0], run.effort.shape)
    bag = data.write_bag(tmp_path / "spiky", run.replace(effort=run.effort + spikes * np.sqrt(np.mean(
        run.effort**2, axis=0))))
    xml = (directory / "nominal.urdf").read_text()
    errors = {}
    for robust in (False, True):
        result = identify([bag], xml, progress=False, robust=robust)
        text = identified_urdf(xml, result.layout, result.identified, result.fit.identified_bodies)
        errors[robust] = predicted_error(mbs.Model.from_urdf_string(text), held_out)
    assert errors[True] < 0.5 * errors[False]
    assert errors[True] < 0.03
