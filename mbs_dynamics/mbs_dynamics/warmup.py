"""Compiles every compiled kernel once, filling numba's on-disk cache, so that
nothing stalls on first use (a cold start compiles for about 80 s; a warm one
loads in under a second). scripts/setup_venv.sh runs it after installing; on a
ROS 2 install run `python3 -m mbs_dynamics.warmup` once after `colcon build`.
"""
import time

import numpy as np

import mbs_dynamics as mbs


def warm_up() -> float:
    """Calls each algorithm once, single state and batch; returns the seconds it took."""
    start = time.perf_counter()
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    qs, vs = np.tile(q, (2, 1)), np.zeros((2, model.nv))
    mbs.inverse_dynamics(model, q, v, v)
    mbs.inverse_dynamics(model, q, v, v, f_ext={"LF_FOOT": np.zeros(6)})
    mbs.inverse_dynamics(model, qs, vs, vs)
    for representation in ("spatial", "hybrid"):
        mbs.inverse_dynamics(model, q, v, v, representation=representation)
        mbs.inverse_dynamics(model, qs, vs, vs, representation=representation)
    mbs.mass_matrix(model, q)
    mbs.mass_matrix(model, qs)
    mbs.forward_dynamics(model, q, v, v)
    mbs.forward_dynamics(model, qs, vs, vs)
    mbs.InverseMassMatrix(model, q) @ v
    mbs.centroidal_momentum(model, q, v)
    mbs.centroidal_momentum(model, qs, vs)
    mbs.centroidal_momentum_matrix(model, q)
    mbs.center_of_mass(model, q)
    mbs.frame_jacobian(model, q, "LF_FOOT")
    mbs.frame_pose(model, q, "LF_FOOT")
    mbs.frame_acceleration(model, q, v, v, "LF_FOOT", "hybrid")
    mbs.frame_jerk(model, q, v, v, v, "LF_FOOT", "hybrid")
    mbs.inverse_dynamics_derivatives(model, q, v, v)
    mbs.forward_dynamics_derivatives(model, q, v, v)
    mbs.linearize(model, q, v, v)
    mbs.linearize(model, qs, vs, vs)
    mbs.inverse_dynamics_derivatives(model, qs, vs, vs)
    mbs.forward_dynamics_derivatives(model, qs, vs, vs)
    mbs.coriolis_matrix(model, q, v)
    mbs.inverse_dynamics_rate(model, q, v, v, v)
    mbs.integrate(model, q, v, 1e-3)
    mbs.contact_step(model, q, v, v, 1e-3, [mbs.PointContact("LF_FOOT")], mbs.Ground(height=1.0))
    return time.perf_counter() - start


if __name__ == "__main__":
    print(f"mbs_dynamics: compiled kernels ready ({warm_up():.1f} s)")
