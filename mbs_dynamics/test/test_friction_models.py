"""Joint friction as real drives have it (issue 31): Coulomb, static friction
with the Stribeck effect, viscous friction and a constant offset, in the
project's URDF extension <mbs:friction>; read by the core's parser (hostile
values refused naming the joint), applied by the core's friction torque,
the inverse dynamics node and the simulator (breaking away at the static
friction, sliding on the Stribeck curve); fitted by identification, whose
regressor columns are checked against the core through written URDFs, and
which recovers a known friction from runs in our simulator; and ignored by
urdf_parser_py, Pinocchio and MuJoCo, which load the same robot."""
from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import close
from lxml import etree
from oracles import robot_path
from ros_processes import Exchange, efforts_by_name, executable, joint_values, wait_for_node
from test_identification import perturbed_robot, simulated_run, smooth_trajectory, ur5_xml

import mbs_dynamics as mbs
from mbs_dynamics.identification import cli, data
from mbs_dynamics.identification import estimation as est
from mbs_dynamics.identification.base_parameters import random_states
from mbs_dynamics.identification.excitation import optimise_excitation
from mbs_dynamics.identification.parameters import ParameterLayout
from mbs_dynamics.identification.urdf_writer import identified_urdf
from mbs_dynamics.multibody.parsers.urdf import DEFAULT_STRIBECK_VELOCITY, MBS_NAMESPACE, URDFError

EVERY_TERM = ("friction", "stribeck", "damping", "offset", "armature")
# The three friction models, by the joint parameters fitted.
MODELS = {"coulomb and viscous": ("friction", "damping", "armature"),
          "asymmetric": ("friction", "damping", "offset", "armature"),
          "stribeck": EVERY_TERM}


def friction_formula(v, coulomb, static, stribeck_velocity, viscous, offset, smoothing):
    """The friction torque, written out here as the README states it."""
    return ((coulomb + (static - coulomb) * np.exp(-(v / stribeck_velocity) ** 2)) * np.tanh(v / smoothing)
            + viscous * v + offset)


def rod_xml(dynamics='damping="0.2" friction="0.3"',
            friction='coulomb="0.3" viscous="0.2" static="0.5" stribeck_velocity="0.1" offset="0.05"',
            kind="revolute") -> str:
    """The turntable of helpers.rod (I = 0.25 kg m² about z, no gravity torque)
    with a <dynamics> and an <mbs:friction>."""
    element = f"<mbs:friction {friction}/>" if friction is not None else ""
    return f"""<robot name="rod" xmlns:mbs="{MBS_NAMESPACE}"><link name="base"/>
<link name="rod"><inertial><origin xyz="0.5 0 0"/><mass value="1.0"/>
<inertia ixx="1e-6" iyy="1e-6" izz="1e-6" ixy="0" ixz="0" iyz="0"/></inertial></link>
<joint name="hinge" type="{kind}"><parent link="base"/><child link="rod"/><axis xyz="0 0 1"/>
<limit lower="-100" upper="100" effort="100" velocity="10"/>
<dynamics {dynamics}/>{element}</joint></robot>"""


# --- the URDF extension, read ---------------------------------------------------


def test_the_friction_element_is_read_into_the_model_and_defaults_where_absent():
    model = mbs.Model.from_urdf_string(rod_xml())
    assert model.warnings == ()  # the element is ours: no "unknown tag" note
    assert (model.friction[0], model.damping[0], model.static_friction[0], model.stribeck_velocity[0],
            model.friction_offset[0]) == (0.3, 0.2, 0.5, 0.1, 0.05)
    # the extension alone, <dynamics> absent: its coulomb and viscous are the joint's
    model = mbs.Model.from_urdf_string(rod_xml(dynamics="", friction='coulomb="0.7" viscous="0.1"'))
    assert (model.friction[0], model.damping[0], model.static_friction[0]) == (0.7, 0.1, 0.7)
    # only what <dynamics> has no place for: Coulomb's law (static = Coulomb) and the default v_s
    model = mbs.Model.from_urdf_string(rod_xml(friction='offset="-0.25"'))
    assert (model.friction[0], model.static_friction[0], model.stribeck_velocity[0], model.friction_offset[0]) \
        == (0.3, 0.3, DEFAULT_STRIBECK_VELOCITY, -0.25)
    # no element: the friction of <dynamics> as before
    model = mbs.Model.from_urdf_string(rod_xml(friction=None))
    assert (model.friction[0], model.static_friction[0], model.friction_offset[0]) == (0.3, 0.3, 0.0)
    # another prefix for the same namespace is the same element
    model = mbs.Model.from_urdf_string(rod_xml(friction='static="0.9"').replace("mbs:", "m:").replace(
        "xmlns:mbs", "xmlns:m"))
    assert model.static_friction[0] == 0.9
    # on a fixed joint: one warning, ignored
    fixed = mbs.parse_urdf_string(rod_xml(kind="fixed"))
    assert fixed.warnings == ("joint 'hinge' <mbs:friction>: a fixed joint has no joint friction; ignored",)


@pytest.mark.parametrize("friction, dynamics, message", [
    ('coulomb="nan"', 'damping="0.2"', "joint 'hinge' <mbs:friction> coulomb is not finite: nan"),
    ('offset="inf"', 'damping="0.2"', "joint 'hinge' <mbs:friction> offset is not finite: inf"),
    ('coulomb="-0.3"', "", "joint 'hinge' <mbs:friction>: coulomb -0.3 is negative"),
    ('viscous="-1"', "", "joint 'hinge' <mbs:friction>: viscous -1 is negative"),
    ('coulomb="0.3" stiction="0.5"', 'friction="0.3"',
     "joint 'hinge' <mbs:friction>: unknown attribute 'stiction' (known: coulomb, viscous, static, "
     "stribeck_velocity, offset)"),
    ('static="0.2"', 'friction="0.3"', "joint 'hinge' <mbs:friction>: static 0.2 is below the Coulomb friction 0.3"),
    ('stribeck_velocity="0"', "", "joint 'hinge' <mbs:friction>: stribeck_velocity 0 must be above 0"),
    ('coulomb="a lot"', "", "joint 'hinge' <mbs:friction>: coulomb 'a lot' is not a number"),
    ('coulomb="1e300"', "", "joint 'hinge' <mbs:friction> coulomb is larger than 1e+12 in magnitude"),
    ('coulomb="0.4"', 'friction="0.3"',
     "joint 'hinge' <mbs:friction>: coulomb 0.4 and <dynamics friction='0.3'> disagree"),
    ('viscous="0.4"/><mbs:friction offset="1"', "", "joint 'hinge' has 2 <mbs:friction> elements"),
])
def test_a_hostile_friction_element_is_refused_naming_the_joint(friction, dynamics, message):
    xml = rod_xml(dynamics=dynamics, friction=friction)
    with pytest.raises(URDFError, match=re.escape(message)):
        mbs.parse_urdf_string(xml)
    with pytest.raises(ValueError, match=re.escape(message)):  # what the nodes and commands catch
        mbs.Model.from_urdf_string(xml)
    mbs.Model.from_urdf_string(rod_xml())  # and the parser goes on reading good ones


# --- the friction torque: the core and the inverse dynamics node ----------------


def test_the_friction_torque_is_the_formula_and_inverse_dynamics_adds_it():
    model = mbs.Model.from_urdf_string(rod_xml())
    v = np.linspace(-1.0, 1.0, 41)[:, None]
    expected = friction_formula(v, 0.3, 0.5, 0.1, 0.2, 0.05, 0.01)
    close(mbs.joint_friction_torques(model, v), expected, 1e-15)
    close(mbs.joint_friction_torques(model, [0.0]), [0.05], 1e-15)  # at rest: the offset
    close(mbs.joint_friction_torques(model, [0.1], 1e-9), [0.3 + 0.2 * np.exp(-1) + 0.02 + 0.05], 1e-15)
    close(mbs.joint_friction_torques(model, [-1.0]), [-0.3 - 0.2 + 0.05], 1e-9)  # past v_s: Coulomb's
    # the UR5 with a friction of each kind on every joint, read back from the identified URDF
    layout = ParameterLayout(mbs.Model.from_urdf_file(robot_path("ur5")), EVERY_TERM)
    p, terms = friction_robot(layout)
    ur5 = mbs.Model.from_urdf_string(identified_urdf(ur5_xml(), layout, p, []))
    q, v, a = random_states(ur5, 20, np.random.default_rng(2))
    close(mbs.inverse_dynamics(ur5, q, v, a) + mbs.joint_friction_torques(ur5, v),
          mbs.inverse_dynamics(ur5, q, v, a) + friction_formula(v, terms["friction"], terms["friction"]
                                                                + terms["stribeck"], DEFAULT_STRIBECK_VELOCITY,
                                                                terms["damping"], terms["offset"], 0.01), 1e-12)


def friction_robot(layout: ParameterLayout, seed: int = 1):
    """p of the layout's model with every joint's friction terms set
    (positive Stribeck excess, offsets of both signs), and those terms by name."""
    rng = np.random.default_rng(seed)
    p = layout.nominal()
    joints = len(layout.actuated_joints)
    terms = {"friction": rng.uniform(0.3, 1.5, joints), "stribeck": rng.uniform(0.2, 0.8, joints),
             "damping": rng.uniform(0.2, 1.5, joints), "offset": rng.uniform(-0.5, 0.5, joints),
             "armature": rng.uniform(0.05, 0.3, joints)}
    for name in layout.joint_parameters:
        p[layout.joint_columns(name)] = terms[name]
    return p, terms


def test_the_inverse_dynamics_node_compensates_the_read_back_friction(start_process, test_node, tmp_path):
    """The node on an identified URDF with <mbs:friction> on every joint, with
    friction_compensation 'measured': its efforts are the inverse dynamics
    plus the friction torque as written out here."""
    layout = ParameterLayout(mbs.Model.from_urdf_file(robot_path("ur5")), EVERY_TERM)
    p, terms = friction_robot(layout)
    path = tmp_path / "ur5_friction.urdf"
    path.write_text(identified_urdf(ur5_xml(), layout, p, []))
    model = mbs.Model.from_urdf_file(path)
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-r", "__node:=id_friction",
                          "-p", f"robot_description_file:={path}", "-p", "friction_compensation:=measured",
                          "-p", "friction_smoothing:=0.05"])
    node.wait_for("\\[id_friction\\]: inverse dynamics of")
    wait_for_node(test_node, "id_friction")
    exchange = Exchange(test_node, "id_friction")
    exchange.wait_connected()
    rng = np.random.default_rng(4)
    for k in range(5):
        q, v = random_state_near_rest(model, rng)
        names, positions, velocities = joint_values(model, q, v)
        got = efforts_by_name(exchange.ask(exchange.joint_state(names, positions, velocities, 1.0 + k)))
        expected = mbs.inverse_dynamics(model, q, v, np.zeros(model.nv)) + friction_formula(
            v, terms["friction"], terms["friction"] + terms["stribeck"], DEFAULT_STRIBECK_VELOCITY,
            terms["damping"], terms["offset"], 0.05)
        close([got[n] for n in names], expected, 1e-9)
    assert node.interrupt() == 0


def test_a_hostile_friction_element_stops_the_node_and_the_command_in_one_line(start_process, tmp_path, capsys):
    """The inverse dynamics node given a URDF whose <mbs:friction> has a negative
    coulomb stops with the parser's message (exit 1, no traceback); so does
    mbs_dynamics_identify given it as the nominal URDF, before reading any data."""
    path = tmp_path / "hostile.urdf"
    path.write_text(rod_xml(dynamics="", friction='coulomb="-0.3"'))
    message = "joint 'hinge' <mbs:friction>: coulomb -0.3 is negative"
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-p",
                          f"robot_description_file:={path}"])
    node.wait_for(f"{re.escape(message)}.*; stopping")
    assert node.wait_exit() == 1 and "Traceback" not in node.output
    status = cli.main(["never_read.csv", "--urdf", str(path), "--output", str(tmp_path / "x.urdf"), "--quiet"])
    error = capsys.readouterr().err
    assert status == 1 and message in error and error.count("\n") == 1 and "Traceback" not in error
    assert not (tmp_path / "x.urdf").exists()


def random_state_near_rest(model, rng):
    """q within the limits, v of -0.3..0.3 rad/s (where the Stribeck term shows)."""
    q, _, _ = random_states(model, 1, rng)
    return q[0], rng.uniform(-0.3, 0.3, model.nv)


# --- the simulator -----------------------------------------------------------------


def test_the_simulator_breaks_away_at_the_static_friction_and_slides_on_the_stribeck_curve():
    """The turntable with F_c 0.3, F_s 0.5, v_s 0.1, F_v 0.2, offset 0.05: at
    rest it holds against torques within the offset ± F_s (0.45 from it: more
    than Coulomb's 0.3) and breaks away beyond; turning, the friction torque
    at its speed keeps it there, on the Stribeck curve between F_s and F_c."""
    model = mbs.Model.from_urdf_string(rod_xml())

    def run(tau, v0, steps=300):
        q, v = np.zeros(1), np.array([v0])
        for _ in range(steps):
            q, v = mbs.contact_step(model, q, v, np.array([tau]), 1e-3, joint_friction=True, joint_damping=True)
        return q[0], v[0]

    for applied in (0.05 + 0.45, 0.05 - 0.45, 0.05):
        assert np.abs(run(applied, 0.0)).max() < 1e-12, applied
    assert run(0.05 + 0.55, 0.0)[1] > 0.01 and run(0.05 - 0.55, 0.0)[1] < -0.01
    for speed in (-1.0, -0.15, -0.05, 0.05, 0.1, 0.15, 1.0):
        holding = mbs.joint_friction_torques(model, [speed], 1e-9)[0]
        close(run(holding, speed, 500)[1], speed, 1e-9)
    # Coulomb's level (no Stribeck excess) does not hold it at speeds below v_s: it slows down and sticks
    for speed in (-0.05, 0.05):
        assert run(0.3 * np.sign(speed) + 0.2 * speed + 0.05, speed, 500)[1] == pytest.approx(0.0, abs=1e-12)


def test_the_offset_alone_is_a_constant_torque_in_the_smooth_integrator():
    """No Coulomb or static friction, an offset of 0.05 N m: nothing acts by
    impulses, so rk4 takes the steps, and the turntable turns back at -0.05 /
    I rad/s²; without joint friction the offset is off too."""
    model = mbs.Model.from_urdf_string(rod_xml(dynamics='damping="0" friction="0"', friction='offset="0.05"'))
    simulation = mbs.Simulation(model, mbs.World(ground=None), dt=1e-3)
    result = simulation.step(np.zeros(1), 1000)
    inertia = 0.25 + 1e-6
    close(simulation.v, [-0.05 / inertia * 1.0], 1e-9)
    close(simulation.q, [-0.05 / inertia * 0.5], 1e-9)
    assert result.smooth_steps == 1000
    off = mbs.Simulation(model, mbs.World(ground=None, joint_friction=False), dt=1e-3)
    off.step(np.zeros(1), 1000)
    assert off.v[0] == 0.0


# --- identification: the regressor's columns, the fit ----------------------------


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_regressor_columns_are_the_core_friction_torque(name):
    """Each friction model's Y_p p equals the core's inverse dynamics plus its
    friction torque on the model read back from the URDF written with p; and
    each joint parameter's column equals the central difference of that
    torque in the parameter, through URDFs written with p ± h."""
    xml = ur5_xml()
    every = ParameterLayout(mbs.Model.from_urdf_string(xml), EVERY_TERM)
    p_every, _ = friction_robot(every)
    for absent in set(EVERY_TERM) - set(MODELS[name]):  # what the model lacks is 0 in the robot
        p_every[every.joint_columns(absent)] = 0.0

    def torque(p):
        model = mbs.Model.from_urdf_string(identified_urdf(xml, every, p, []))
        return mbs.inverse_dynamics(model, q, v, a) + mbs.joint_friction_torques(model, v), model

    q, v, a = random_states(every.model, 10, np.random.default_rng(3))
    v = 0.2 * v  # around the Stribeck velocity
    tau, model = torque(p_every)
    layout = ParameterLayout(model, MODELS[name])
    Y = layout.regressor(q, v, a)
    close(Y @ layout.nominal(), tau, 1e-12)
    h = 1e-3
    for parameter in layout.joint_parameters:
        for k, column in enumerate(layout.joint_columns(parameter)):
            step = np.zeros_like(p_every)
            step[every.joint_columns(parameter)[k]] = h
            difference = (torque(p_every + step)[0] - torque(p_every - step)[0]) / (2 * h)
            close(Y[..., column], difference, 1e-9)


def test_identification_recovers_an_asymmetric_stribeck_friction_from_exact_torques():
    """Torques of a perturbed UR5 with every friction term on random states
    at speeds around v_s: the Stribeck model recovers each joint's F_c,
    F_s - F_c, F_v and offset to 1 %; the Coulomb-and-viscous model cannot
    explain them (a residual 100 times larger)."""
    model = mbs.Model.from_urdf_string(ur5_xml())
    layout = ParameterLayout(model, EVERY_TERM)
    p, terms = friction_robot(layout, seed=7)
    p[:layout.inertial_count] = perturbed_robot(ParameterLayout(model), np.random.default_rng(0))[
        :layout.inertial_count]
    q, v, a = random_states(model, 4000, np.random.default_rng(1))
    v = 0.5 * v
    tau = layout.regressor(q, v, a) @ p
    rows = layout.joint_coordinates()
    scale = np.sqrt(np.mean(tau[:, rows] ** 2, axis=0))
    fits = {}
    for name in ("coulomb and viscous", "stribeck"):
        fitted = ParameterLayout(model, MODELS[name])
        fits[name] = est.fit(fitted, est.normal_equations(fitted, q, v, a, tau, 1 / scale**2).mean(),
                             torque_scale=scale)
    found = fits["stribeck"].parameters
    for parameter in ("friction", "stribeck", "offset"):
        assert np.max(np.abs(found[layout.joint_columns(parameter)] - terms[parameter])) < 0.01, parameter
    assert np.max(np.abs(found[layout.joint_columns("damping")] / terms["damping"] - 1)) < 0.01
    assert fits["coulomb and viscous"].cost > 100 * fits["stribeck"].cost


@pytest.fixture(scope="module")
def stribeck_runs(tmp_path_factory):
    """A UR5 off its nominal URDF (inertias 20-40 %, friction, armature) with
    static friction 0.3-1.0 N m above Coulomb's, v_s 0.15 rad/s and offsets of
    ±0.5 N m, run in our simulator under computed-torque control: along an
    excitation trajectory and along slow sums of sines (speeds around v_s),
    recorded as CSV files."""
    directory = tmp_path_factory.mktemp("friction_models")
    nominal_xml = ur5_xml()
    nominal = mbs.Model.from_urdf_string(nominal_xml)
    layout, default = ParameterLayout(nominal, EVERY_TERM, stribeck_velocity=0.15), ParameterLayout(nominal)
    rng = np.random.default_rng(5)
    true_default = perturbed_robot(default, rng)
    p = layout.nominal()
    p[:layout.inertial_count] = true_default[:layout.inertial_count]
    for name in default.joint_parameters:
        p[layout.joint_columns(name)] = true_default[default.joint_columns(name)]
    joints = len(layout.actuated_joints)
    p[layout.joint_columns("stribeck")] = rng.uniform(0.3, 1.0, joints)
    p[layout.joint_columns("offset")] = rng.uniform(-0.5, 0.5, joints)
    true_xml = identified_urdf(nominal_xml, layout, p, np.flatnonzero(nominal.mass > 0))
    true = mbs.Model.from_urdf_string(true_xml)
    assert np.all(true.stribeck_velocity == 0.15) and np.all(true.static_friction > true.friction)
    t = np.arange(0.0, 20.0, 1e-3)
    excitation = (t, *optimise_excitation(nominal, layout=ParameterLayout(nominal), seed=1,
                                          max_iterations=20).sample(t))
    slow = smooth_trajectory(nominal, 4, 20.0, rate=1000.0)
    paths = [data.write_csv(directory / f"run{k}.csv", simulated_run(true, nominal, reference))
             for k, reference in enumerate((excitation, slow))]
    (directory / "nominal.urdf").write_text(nominal_xml)
    return directory, paths, true


def test_identify_recovers_the_simulated_friction_and_writes_it_for_every_tool(stribeck_runs, capsys):
    """mbs_dynamics_identify with the Stribeck model on runs of our simulator
    (its exact stick-slip law, not the fitted smooth one) writes <mbs:friction>
    whose coefficients are the true ones (measured: F_c within 0.006 N m, the
    offset 0.013, F_s - F_c 0.037 of 0.47, F_v 0.5 %), v_s as asked; and the
    output loads in Pinocchio as the same robot."""
    directory, paths, true = stribeck_runs
    output = directory / "identified.urdf"
    status = cli.main([str(path) for path in paths] + [
        "--urdf", str(directory / "nominal.urdf"), "--output", str(output), "--quiet",
        "--joint-parameters", ",".join(EVERY_TERM), "--stribeck-velocity", "0.15"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "friction offsets (<mbs:friction offset>)" in printed and "(v_s 0.15)" in printed
    text = output.read_text()
    assert f'xmlns:mbs="{MBS_NAMESPACE}"' in text and text.count("<mbs:friction ") == 6
    found = mbs.Model.from_urdf_file(output)
    assert np.all(found.stribeck_velocity == 0.15)
    assert np.max(np.abs(found.friction - true.friction)) < 0.02
    assert np.max(np.abs(found.friction_offset - true.friction_offset)) < 0.03
    assert np.max(np.abs((found.static_friction - found.friction) - (true.static_friction - true.friction))) < 0.08
    assert np.max(np.abs(found.damping / true.damping - 1)) < 0.02
    same_robot_in_pinocchio(text, found)


def same_robot_in_pinocchio(text: str, model) -> None:
    """Pinocchio loads the URDF text: the same joints, body masses, and the
    <dynamics> friction and damping (its model.friction, model.damping)."""
    pin = pytest.importorskip("pinocchio")
    pin_model = pin.buildModelFromXML(text)
    assert list(pin_model.names)[1:] == list(model.joint_names)
    close([pin_model.inertias[pin_model.getJointId(name)].mass for name in model.joint_names], model.mass, 1e-12)
    close(pin_model.friction, model.friction, 1e-15)
    close(pin_model.damping, model.damping, 1e-15)


# --- the written URDF: read back, and ignored by other parsers -------------------


def test_the_written_friction_reads_back_and_other_parsers_ignore_it():
    xml = ur5_xml()
    layout = ParameterLayout(mbs.Model.from_urdf_string(xml), EVERY_TERM)
    p, terms = friction_robot(layout)
    bodies = np.flatnonzero(layout.body_parameters(p)[:, 0] > 0)
    text = identified_urdf(xml, layout, p, bodies)
    assert f'xmlns:mbs="{MBS_NAMESPACE}"' in text
    root = etree.fromstring(text.encode())
    elements = root.findall(f"joint/{{{MBS_NAMESPACE}}}friction")
    assert len(elements) == 6 and list(elements[0].attrib) == ["coulomb", "viscous", "static", "stribeck_velocity",
                                                              "offset"]
    for element in elements:  # the standard element says the same, for other tools
        dynamics = element.getparent().find("dynamics")
        assert (dynamics.get("friction"), dynamics.get("damping")) == (element.get("coulomb"), element.get("viscous"))
    model = mbs.Model.from_urdf_string(text)
    again = ParameterLayout(model, EVERY_TERM)
    close(again.nominal(), p, 1e-12)
    assert np.all(again.stribeck_velocities == DEFAULT_STRIBECK_VELOCITY)
    assert model.warnings == ()
    # the nominal URDF's per-joint v_s is the layout's, unless one is given for all
    assert np.all(ParameterLayout(model, EVERY_TERM, stribeck_velocity=0.3).stribeck_velocities == 0.3)
    # written again from a layout without the extra terms: kept from the nominal, still consistent
    rewritten = mbs.Model.from_urdf_string(identified_urdf(text, ParameterLayout(model), ParameterLayout(model)
                                                           .nominal(), []))
    close(ParameterLayout(rewritten, EVERY_TERM).nominal(), p, 1e-12)

    # urdf_parser_py (the parser our own uses) reads the robot, the extension aside
    from urdf_parser_py import urdf as urdf_parser
    robot = urdf_parser.URDF.from_xml_string(text)
    joints = {joint.name: joint for joint in robot.joints}
    assert [joints[name].dynamics.friction for name in model.joint_names] == model.friction.tolist()
    masses = {link.name: link.inertial.mass for link in robot.links if link.inertial is not None}
    link_masses = {link.name: link.inertial.mass for link in model.description.links.values()
                   if link.inertial is not None}
    assert masses == pytest.approx(link_masses, rel=1e-15)
    # Pinocchio
    same_robot_in_pinocchio(text, model)
    # MuJoCo's URDF importer (meshes dropped: it would look for them)
    mujoco = pytest.importorskip("mujoco")
    for link in root.findall("link"):
        for element in link.findall("visual") + link.findall("collision"):
            link.remove(element)
    extension = etree.SubElement(root, "mujoco")
    etree.SubElement(extension, "compiler", discardvisual="true", fusestatic="false", balanceinertia="false",
                     inertiafromgeom="false")
    mj = mujoco.MjModel.from_xml_string(etree.tostring(root, encoding="unicode"))
    assert [mj.joint(k).name for k in range(mj.njnt)] == list(model.joint_names)
    mj_masses = {mj.body(k).name: mj.body_mass[k] for k in range(1, mj.nbody)}  # massless end links merged
    assert mj_masses == pytest.approx({name: link_masses.get(name, 0.0) for name in mj_masses}, rel=1e-12)
    assert sum(mj_masses.values()) == pytest.approx(sum(link_masses.values()), rel=1e-12)
    close(mj.dof_frictionloss, model.friction, 1e-12)
    close(mj.dof_damping, model.damping, 1e-12)


def test_the_default_models_output_has_no_extension():
    """Nothing new asked for, nothing new written: no <mbs:friction>, no xmlns:mbs."""
    xml = ur5_xml()
    layout = ParameterLayout(mbs.Model.from_urdf_string(xml))
    p, _ = friction_robot(layout)
    text = identified_urdf(xml, layout, p, [])
    assert "mbs" not in text.replace("mbs_dynamics", "")


@pytest.mark.parametrize("arguments, message", [
    (["--stribeck-velocity", "0.2"], "--stribeck-velocity sets the Stribeck velocity of the stribeck joint "
                                     "parameter, which --joint-parameters does not name"),
    (["--joint-parameters", "friction,stribeck", "--stribeck-velocity", "0"],
     "argument --stribeck-velocity: '0' is not a finite number > 0"),
    (["--joint-parameters", "friction,stribeck", "--stribeck-velocity", "nan"],
     "argument --stribeck-velocity: 'nan' is not a finite number > 0"),
    (["--joint-parameters", "friction,stiction"], "stiction: joint parameters are among friction, stribeck, "
                                                 "damping, offset, armature"),
])
def test_the_command_refuses_a_stribeck_velocity_it_cannot_use(tmp_path, capsys, arguments, message):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run.csv", "--urdf", robot_path("ur5"), "--output", str(tmp_path / "x.urdf"), *arguments])
    error = capsys.readouterr().err
    assert exit_.value.code == 2 and message in error and error.count("\n") == 1
    assert not (tmp_path / "x.urdf").exists()
