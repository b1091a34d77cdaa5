"""Contact, loop-closure and impact dynamics: the three methods agree, the
constrained points do not accelerate, M a + h = tau + G^T λ checked through
inverse dynamics with the forces as external wrenches, a four-bar linkage
against its one-DoF Lagrangian, rank-deficient sets, impacts."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest

from helpers import close
from oracles import random_state, robot_path

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
SOLES = ("left_sole_link", "right_sole_link")


def solo12():
    return mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)


def talos():
    return mbs.Model.from_urdf_file(robot_path("talos"), floating_base=True)


def robot_with_contacts(robot):
    """Solo-12 on four point feet, or TALOS on its two soles."""
    if robot == "solo12":
        return solo12(), [mbs.PointContact(foot) for foot in FEET]
    return talos(), [mbs.FrameContact(sole) for sole in SOLES]


def as_wrenches(contacts, forces):
    """Contact forces as f_ext for inverse_dynamics: wrenches at the frame origins."""
    return {c.frame: (np.r_[0, 0, 0, f] if f.size == 3 else f) for c, f in zip(contacts, forces, strict=True)}


def point_acceleration(model, q, v, a, frame, point=(0.0, 0.0, 0.0)):
    """d²p/dt² of a point of a frame, from frame_acceleration (an independent route)."""
    pose = mbs.frame_pose(model, q, frame)
    r = pose[:3, :3] @ np.asarray(point)
    w = mbs.frame_velocity(model, q, v, frame, "hybrid")[:3]
    acceleration = mbs.frame_acceleration(model, q, v, a, frame, "hybrid")
    return acceleration[3:] + np.cross(acceleration[:3], r) + np.cross(w, np.cross(w, r))


@pytest.mark.parametrize("robot", ["solo12", "talos"])
def test_methods_agree_and_constraints_hold(robot):
    model, contacts = robot_with_contacts(robot)
    rng = np.random.default_rng(40)
    q, v, tau = random_state(model, rng)
    solutions = {method: mbs.contact_forward_dynamics(model, q, v, tau, contacts, method=method)
                 for method in mbs.contact.constraints.METHODS}
    a, forces = solutions["kkt"]
    assert not solutions["kkt"].rank_deficient and solutions["kkt"].residual < 1e-9
    for other_a, other_forces in solutions.values():
        close(other_a, a, 1e-9)
        close(np.concatenate(other_forces), np.concatenate(forces), 1e-9)
    for contact in contacts:  # the constrained motion is still
        if robot == "solo12":
            close(point_acceleration(model, q, v, a, contact.frame), np.zeros(3), 1e-9)
        else:
            close(mbs.frame_acceleration(model, q, v, a, contact.frame, "body"), np.zeros(6), 1e-9)
    # M a + h = tau + sum J^T f: the forces as external wrenches at the frame origins
    close(mbs.inverse_dynamics(model, q, v, a, f_ext=as_wrenches(contacts, forces)), tau, 1e-9)


def test_point_off_the_frame_origin_and_baumgarte():
    model = solo12()
    rng = np.random.default_rng(41)
    q, v, tau = random_state(model, rng)
    point = np.array([0.01, -0.02, 0.03])
    target = mbs.frame_pose(model, q, "FL_FOOT")[:3, :3] @ point + mbs.frame_pose(model, q, "FL_FOOT")[:3, 3] \
        + np.array([0.0, 0.0, 0.002])
    contacts = [mbs.PointContact("FL_FOOT", tuple(point), target=tuple(target)), mbs.PointContact("HR_FOOT")]
    a, forces = mbs.contact_forward_dynamics(model, q, v, tau, contacts)
    close(point_acceleration(model, q, v, a, "FL_FOOT", point), np.zeros(3), 1e-9)
    alpha, beta = 5.0, 7.0
    for method in mbs.contact.constraints.METHODS:
        a, _ = mbs.contact_forward_dynamics(model, q, v, tau, contacts, method=method, baumgarte=(alpha, beta))
        rows = mbs.contact.constraints.constraint_rows(model, q, v, contacts)
        velocity = rows.G @ v
        close(point_acceleration(model, q, v, a, "FL_FOOT", point),
              -2 * alpha * velocity[:3] - beta**2 * np.array([0.0, 0.0, -0.002]), 1e-9)
        close(point_acceleration(model, q, v, a, "HR_FOOT"), -2 * alpha * velocity[3:], 1e-9)


def test_frame_contact_off_the_frame_origin_moves_only_the_wrench():
    """Welding a body at one point welds it everywhere: an offset contact frame
    gives the same accelerations, and its wrench is the one about the frame
    origin moved to the offset point (n' = n - r x f, r = R point)."""
    model, contacts = robot_with_contacts("talos")
    rng = np.random.default_rng(45)
    q, v, tau = random_state(model, rng)
    offset = (0.05, -0.02, -0.1)
    moved = [mbs.FrameContact(contacts[0].frame, offset), contacts[1]]
    for method in mbs.contact.constraints.METHODS:
        a, forces = mbs.contact_forward_dynamics(model, q, v, tau, contacts, method=method)
        a_moved, forces_moved = mbs.contact_forward_dynamics(model, q, v, tau, moved, method=method)
        close(a_moved, a, 1e-9)
        r = mbs.frame_pose(model, q, contacts[0].frame)[:3, :3] @ np.array(offset)
        n, f = forces[0][:3], forces[0][3:]
        close(forces_moved[0], np.r_[n - np.cross(r, f), f], 1e-8)
        close(forces_moved[1], forces[1], 1e-9)
    impulse = mbs.impact(model, q, v, contacts, 0.5)
    impulse_moved = mbs.impact(model, q, v, moved, 0.5)
    close(impulse_moved[0], impulse[0], 1e-9)
    close(impulse_moved[1][0][3:], impulse[1][0][3:], 1e-9)


PLANAR_ARM = """<robot name="planar_arm">
  <link name="base"/>
  {links}
</robot>"""


def planar_arm(lengths=(0.5, 0.4, 0.3), masses=(2.0, 1.5, 1.0), extra=""):
    """Links along their z, revolute about y, each of length L with its CoM at L/2."""
    links, parent = [], "base"
    for k, (length, mass) in enumerate(zip(lengths, masses, strict=True)):
        origin = 0.0 if k == 0 else lengths[k - 1]
        rod = mass * length**2 / 12
        links.append(f"""
  <link name="l{k}"><inertial><origin xyz="0 0 {length / 2}"/><mass value="{mass}"/>
    <inertia ixx="{rod}" iyy="{rod}" izz="1e-6" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j{k}" type="revolute"><parent link="{parent}"/><child link="l{k}"/>
    <origin xyz="0 0 {origin}"/><axis xyz="0 1 0"/><limit lower="-6" upper="6" effort="1" velocity="1"/></joint>""")
        parent = f"l{k}"
    links.append(f"""
  <link name="tip"/><joint name="tip_joint" type="fixed"><parent link="{parent}"/><child link="tip"/>
    <origin xyz="0 0 {lengths[-1]}"/></joint>""")
    return mbs.Model.from_urdf_string(PLANAR_ARM.format(links="".join(links) + extra))


def test_rank_deficient_contact_gets_the_minimum_norm_forces_and_a_flag():
    """A planar arm's tip held by a point contact: the out-of-plane row of G is zero."""
    model = planar_arm()
    rng = np.random.default_rng(42)
    q, v, tau = rng.uniform(-1, 1, 3), rng.normal(size=3), rng.normal(size=3)
    contacts = [mbs.PointContact("tip")]
    solutions = [mbs.contact_forward_dynamics(model, q, v, tau, contacts, method=m) for m in mbs.contact.constraints.METHODS]
    for solution in solutions:
        a, (force,) = solution
        assert solution.rank_deficient and solution.rank == 2 and solution.rows == 3
        assert np.all(np.isfinite(a)) and np.all(np.isfinite(force))
        assert solution.residual < 1e-9
        assert abs(force[1]) < 1e-12  # nothing pushes along the free (out-of-plane) axis
        close(a, solutions[0][0], 1e-9)
        close(force, solutions[0][1][0], 1e-9)
        close(point_acceleration(model, q, v, a, "tip"), np.zeros(3), 1e-9)
    # the same arm with two contacts holding the same point: forces split, minimum norm
    a2, (f1, f2) = mbs.contact_forward_dynamics(model, q, v, tau, contacts * 2, method="schur")
    close(a2, solutions[0][0], 1e-9)
    close(f1, f2, 1e-9)
    close(f1 + f2, solutions[0][1][0], 1e-9)


def test_four_bar_linkage_matches_its_lagrangian():
    """A parallelogram: crank and rocker of length a and mass m turn about pivots
    b apart, the coupler translates. One DoF θ (from vertical) with
    (2/3 m a² + m2 a²) θ'' = (m + m2) a g sin θ, and the joints move as (θ, -θ, θ)."""
    a_len, b_len, m, m2, g = 0.4, 0.6, 1.2, 0.8, 9.81
    ground = f"""
  <link name="pivot"/><joint name="pivot_joint" type="fixed"><parent link="base"/><child link="pivot"/>
    <origin xyz="{b_len} 0 0"/></joint>"""
    model = planar_arm((a_len, b_len, a_len), (m, m2, m), extra=ground)
    closure = [mbs.LoopClosure("tip", "pivot")]
    for theta, omega in ((0.3, 0.0), (-0.7, 1.3), (1.1, -2.0)):
        q = np.array([theta, np.pi / 2 - theta, theta + np.pi / 2])
        close(mbs.frame_pose(model, q, "tip")[:3, 3], [b_len, 0, 0], 1e-12)
        v = omega * np.array([1.0, -1.0, 1.0])
        theta_dd = (m + m2) * a_len * g * np.sin(theta) / (2 / 3 * m * a_len**2 + m2 * a_len**2)
        for method in mbs.contact.constraints.METHODS:
            solution = mbs.contact_forward_dynamics(model, q, v, np.zeros(3), closure, method=method)
            assert solution.rank_deficient  # planar: the y row is zero
            close(solution[0], theta_dd * np.array([1.0, -1.0, 1.0]), 1e-9)
    weld = mbs.LoopClosure("tip", "pivot", weld=True)
    assert weld.rows == 6
    solution = mbs.contact_forward_dynamics(model, q, 0 * v, np.zeros(3), [weld])
    close(solution[0], np.zeros(3), 1e-9)  # welded, the linkage is a structure
    assert solution.rank == 3


@pytest.mark.parametrize("restitution", [0.0, 0.5, 1.0])
def test_impact(restitution):
    model = solo12()
    rng = np.random.default_rng(43)
    q, v_minus, _ = random_state(model, rng)
    contacts = [mbs.PointContact(foot) for foot in FEET[:3]] + [mbs.FrameContact("HR_FOOT")]
    v_plus, impulses = mbs.impact(model, q, v_minus, contacts, restitution)
    rows = mbs.contact.constraints.constraint_rows(model, q, v_minus, contacts)
    close(rows.G @ v_plus, -restitution * rows.G @ v_minus, 1e-9)
    M = mbs.mass_matrix(model, q)
    # M (v+ - v-) = sum J^T Λ, checked as the momentum change against impulses as wrenches
    wrenches = as_wrenches(contacts, impulses)
    zero_gravity = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True, gravity=(0, 0, 0))
    close(mbs.inverse_dynamics(zero_gravity, q, 0 * v_minus, v_plus - v_minus, f_ext=wrenches), np.zeros(model.nv),
          1e-9)
    energy = lambda v: 0.5 * v @ M @ v  # noqa: E731
    if restitution == 1.0:
        close(energy(v_plus), energy(v_minus), 1e-9)
    else:
        assert energy(v_plus) < energy(v_minus)


def test_bad_constraints_are_refused():
    model = solo12()
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    with pytest.raises(ValueError, match="no frame 'LF_TOE'"):
        mbs.contact_forward_dynamics(model, q, v, v, [mbs.PointContact("LF_TOE")])
    with pytest.raises(ValueError, match="method must be one of"):
        mbs.contact_forward_dynamics(model, q, v, v, [mbs.PointContact("FL_FOOT")], method="qp")
    with pytest.raises(ValueError, match="no constraints"):
        mbs.contact_forward_dynamics(model, q, v, v, [])
    with pytest.raises(ValueError, match="restitution"):
        mbs.impact(model, q, v, [mbs.PointContact("FL_FOOT")], 1.5)
    bad = v.copy()
    bad[0] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        mbs.contact_forward_dynamics(model, q, bad, v, [mbs.PointContact("FL_FOOT")])


def standing(model):
    """The robot upright at its neutral joint angles, at rest."""
    q = model.neutral_configuration()
    q[2] = 0.3
    return q, np.zeros(model.nv)


@pytest.mark.parametrize("robot", ["solo12", "talos"])
def test_contact_inverse_dynamics_balances_the_base(robot):
    model, contacts = robot_with_contacts(robot)
    rng = np.random.default_rng(44)
    q, v = standing(model)
    for a in (np.zeros(model.nv), 0.3 * rng.normal(size=model.nv)):
        solution = mbs.contact_inverse_dynamics(model, q, v, a, contacts)
        tau, forces = solution
        assert solution.feasible, solution.message
        base = slice(model.v_index("root_joint"), model.v_index("root_joint") + 6)
        assert np.all(tau[base] == 0)
        # independent check: the forces as external wrenches leave exactly tau to the joints
        close(mbs.inverse_dynamics(model, q, v, a, f_ext=as_wrenches(contacts, forces)), tau, 1e-9)
        # minimum norm: no force in the null space of the base balance could be removed
        stacked = np.concatenate(forces)
        rows = mbs.contact.constraints.constraint_rows(model, q, v, contacts)
        Gw = np.vstack([to_force @ rows.G[block] for block, to_force in rows.blocks])
        null = np.linalg.svd(Gw[:, base].T)[2][6:]
        close(null @ stacked, np.zeros(null.shape[0]), 1e-9)
    if robot == "solo12":  # at rest, the feet carry the weight
        _, forces = mbs.contact_inverse_dynamics(model, q, v, np.zeros(model.nv), contacts)
        close(sum(forces), [0, 0, model.total_mass * 9.81], 1e-9)


def test_contact_inverse_dynamics_with_friction_cones():
    model = solo12()
    contacts = [mbs.PointContact(foot) for foot in FEET]
    q, v = standing(model)
    a = np.zeros(model.nv)
    a[3] = 2.0  # the base accelerates forward (body x): the feet must push sideways
    free, free_forces = mbs.contact_inverse_dynamics(model, q, v, a, contacts)
    mu = 0.5
    solution = mbs.contact_inverse_dynamics(model, q, v, a, contacts, friction=mu)
    tau, forces = solution
    assert solution.feasible, solution.message
    close(mbs.inverse_dynamics(model, q, v, a, f_ext=as_wrenches(contacts, forces)), tau, 1e-8)
    for f in forces:
        assert f[2] >= -1e-9 and np.hypot(f[0], f[1]) <= mu * f[2] + 1e-7
    close(solution.base_wrench, np.zeros(6), 1e-9)
    # one normal per contact: tilted ground under the front feet turns their cones
    tilted = np.array([[0.0, np.sin(0.3), np.cos(0.3)]] * 2 + [[0.0, 0.0, 2.0]] * 2)  # any length
    solution = mbs.contact_inverse_dynamics(model, q, v, a, contacts, friction=mu, normal=tilted)
    assert solution.feasible, solution.message
    for f, n in zip(solution[1], tilted / np.linalg.norm(tilted, axis=1)[:, None], strict=True):
        assert f @ n >= -1e-9 and np.linalg.norm(f - (f @ n) * n) <= mu * (f @ n) + 1e-7
    with pytest.raises(ValueError, match="non-zero"):
        mbs.contact_inverse_dynamics(model, q, v, a, contacts, friction=mu, normal=np.zeros((4, 3)))
    # too slippery to push the base that hard: said, not hidden
    slippery = mbs.contact_inverse_dynamics(model, q, v, a, contacts, friction=0.05)
    assert not slippery.feasible and "friction cones" in slippery.message
    # one foot cannot hold the base's moments: what is left over is the base wrench
    single = mbs.contact_inverse_dynamics(model, q, v, a, contacts[:1])
    assert not single.feasible and "cannot balance" in single.message
    base = slice(model.v_index("root_joint"), model.v_index("root_joint") + 6)
    unbalanced = mbs.inverse_dynamics(model, q, v, a, f_ext=as_wrenches(contacts[:1], single[1]))[base]
    close(single.base_wrench, unbalanced, 1e-9)
    assert np.linalg.norm(single.base_wrench) == pytest.approx(single.base_residual, rel=1e-9)
    with pytest.raises(ValueError, match="no floating base"):
        mbs.contact_inverse_dynamics(planar_arm(), np.zeros(3), np.zeros(3), np.zeros(3), [mbs.PointContact("tip")])


def test_full_rank_certificate_never_passes_a_deficient_set():
    """The SVD-free test that lets kkt and schur skip the SVD: it may only say
    yes when the SVD would, and says yes for well-conditioned rows."""
    from mbs_dynamics.contact.constraints import RANK_TOLERANCE, _certainly_full_rank

    rng = np.random.default_rng(12)
    for trial in range(400):
        m, n = rng.integers(1, 13), 18
        G = rng.normal(size=(m, n))
        if trial % 2:  # rank deficient, exactly or to within the tolerance
            G[-1] = G[:-1].T @ rng.normal(size=m - 1) + rng.choice([0.0, 1e-12, 1e-10]) * rng.normal(size=n)
        s = np.linalg.svd(G, compute_uv=False)
        full = s[-1] > RANK_TOLERANCE * s[0]
        if _certainly_full_rank(G):
            assert full
        elif trial % 2 == 0:
            assert s[-1] < 1e-5 * s[0]  # only near-deficient rows are left to the SVD


@pytest.mark.parametrize("robot", ["solo12", "talos"])
def test_compiled_kkt_path_matches_the_general_one(robot, monkeypatch):
    """The one-kernel "kkt" of point and frame contacts (block factorisation of
    the saddle-point system) gives the general path's LU solution of it to
    1e-12 (relative: the two round differently), with targets and Baumgarte
    terms, frame contacts off their origins, points and frames mixed."""
    from mbs_dynamics.contact import constraints

    model, contacts = robot_with_contacts(robot)
    frames = [c.frame for c in contacts]
    sets = [contacts,
            [mbs.PointContact(f, (0.01, -0.02, 0.03), target=(0.1, 0.0, 0.0)) for f in frames],
            [mbs.FrameContact(frames[0], (0.02, 0.01, -0.01)), mbs.PointContact(frames[1], target=(0.0, 0.1, 0.0))]]
    rng = np.random.default_rng(44)
    q, v, tau = random_state(model, rng)
    compiled = [[mbs.contact_forward_dynamics(model, q, v, tau, s, baumgarte=b) for b in ((0, 0), (3.0, 5.0))]
                for s in sets]
    assert constraints._compiled_contacts(model, tuple(sets[2])) is not None
    monkeypatch.setattr(constraints, "_compiled_contacts", lambda model, contacts: None)
    monkeypatch.setattr(constraints, "_last_contacts", (None, (), None))  # nothing kept
    for s, solutions in zip(sets, compiled, strict=True):
        for b, solution in zip(((0, 0), (3.0, 5.0)), solutions, strict=True):
            general = mbs.contact_forward_dynamics(model, q, v, tau, s, baumgarte=b)
            scale = max(1.0, np.abs(general[0]).max())
            assert np.abs(solution[0] - general[0]).max() <= 1e-12 * scale
            forces, expected = np.concatenate(solution[1]), np.concatenate(general[1])
            assert np.abs(forces - expected).max() <= 1e-12 * max(1.0, np.abs(expected).max())
            assert [f.shape for f in solution[1]] == [f.shape for f in general[1]]
            assert (solution.rank, solution.rows) == (general.rank, general.rows) and not solution.rank_deficient
            assert solution.residual < 1e-9


def test_compiled_kkt_path_leaves_deficient_sets_and_bad_inputs_to_the_general_one():
    """The kernel declines (status 1) a G it cannot certify as of full rank:
    the general path then answers with its SVD, flag and minimum-norm forces
    (test_rank_deficient_contact_...); bad inputs keep their messages."""
    from mbs_dynamics.contact import constraints
    from mbs_dynamics.multibody.workspace import scratch

    model = planar_arm()
    rng = np.random.default_rng(42)
    q, v, tau = rng.uniform(-1, 1, 3), rng.normal(size=3), rng.normal(size=3)
    compiled = constraints._compiled_contacts(model, (mbs.PointContact("tip"),))
    a, forces = np.empty(3), np.empty(3)
    status, _ = constraints._contact_dynamics_kernel(model.packed, model.dof_parent, q, v, tau, *compiled[:7], 0.0,
                                                     0.0, a, forces, scratch(model))
    assert status == 1
    solution = mbs.contact_forward_dynamics(model, q, v, tau, [mbs.PointContact("tip")])
    assert solution.rank_deficient and solution.rank == 2 and abs(solution[1][0][1]) < 1e-12

    model = solo12()
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    feet = [mbs.PointContact(f) for f in FEET]
    for bad, name, message in ((np.r_[q[:3], 0.5, 0.5, 0.5, 0.0, q[7:]], "q", "has norm 0.866"),
                               (np.full(model.nv, np.nan), "v", "v has a non-finite value"),
                               (np.full(model.nv, -np.inf), "tau", "tau has a non-finite value"),
                               (np.zeros(model.nv + 1), "tau", r"tau must have shape \(18,\)")):
        arguments = {"q": q, "v": v, "tau": v} | {name: bad}
        with pytest.raises(ValueError, match=message):
            mbs.contact_forward_dynamics(model, arguments["q"], arguments["v"], arguments["tau"], feet)
    with pytest.raises(ValueError, match="cannot be computed: the inputs are too large"):
        mbs.contact_forward_dynamics(model, q, np.full(model.nv, 1e200), v, feet)
    assert np.all(np.isfinite(mbs.contact_forward_dynamics(model, q, v, v, feet)[0]))  # and it still answers
