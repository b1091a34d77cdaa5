"""TSID as a test-only oracle, run in its own environment (.venv-tsid:
tsid 1.10.0's wheels are built against Pinocchio 4.0.0 and crash beside the
suite's pin 4.1.0): reads a problem (JSON on stdin, Pinocchio's conventions:
q, v, [linear; angular] twists and gains) and prints TSID's accelerations,
actuator torques and contact forces as JSON. Imports only tsid, pinocchio,
numpy."""
import json
import sys

import numpy as np
import pinocchio as pin
import tsid


def se3_sample(position, rotation, twist):
    sample = tsid.TrajectorySample(12, 6)
    sample.value(np.r_[position, np.asarray(rotation).T.ravel()])  # SE3ToVector: p, then R by columns
    sample.derivative(np.asarray(twist, dtype=float))
    sample.second_derivative(np.zeros(6))
    return sample


def build(p):
    """(formulation, solver, q, v, objects kept alive) of the problem p."""
    model = pin.buildModelFromUrdf(p["urdf"], pin.JointModelFreeFlyer())
    robot = tsid.RobotWrapper(model, tsid.FLOATING_BASE_SYSTEM, False)
    q, v = np.array(p["q"]), np.array(p["v"])
    formulation = tsid.InverseDynamicsFormulationAccForce("tsid", robot, False)
    formulation.computeProblemData(0.0, q, v)
    keep = []
    for c in p["contacts"]:
        normal = np.array([0.0, 0.0, 1.0])
        if c["kind"] == "point":
            contact = tsid.ContactPoint(c["frame"], robot, c["frame"], normal, c["mu"], c["fmin"], c["fmax"])
            contact.useLocalFrame(False)
            size = 3
        else:
            contact = tsid.Contact6d(c["frame"], robot, c["frame"], np.array(c["corners"]).T.copy(), normal, c["mu"],
                                     c["fmin"], c["fmax"])
            size = 6
        contact.setKp(c["kp"] * np.ones(size))
        contact.setKd(c["kd"] * np.ones(size))
        T = np.array(c["reference"])
        contact.setReference(pin.SE3(T[:3, :3], T[:3, 3]))
        formulation.addRigidContact(contact, c["regularization"])
        keep.append(contact)
    com = tsid.TaskComEquality("com", robot)
    com.setKp(p["com"]["kp"] * np.ones(3))
    com.setKd(p["com"]["kd"] * np.ones(3))
    sample = tsid.TrajectorySample(3)
    sample.value(np.array(p["com"]["position"]))
    sample.derivative(np.array(p["com"]["velocity"]))
    sample.second_derivative(np.array(p["com"]["acceleration"]))
    com.setReference(sample)
    formulation.addMotionTask(com, p["com"]["weight"], 1, 0.0)
    keep.append(com)
    for k, f in enumerate(p["frames"]):
        task = tsid.TaskSE3Equality(f"frame{k}", robot, f["frame"])
        task.setKp(np.array(f["kp"]))
        task.setKd(np.array(f["kd"]))
        task.setMask(np.array(f["mask"], dtype=float))
        T = np.array(f["reference"])
        task.setReference(se3_sample(T[:3, 3], T[:3, :3], f["twist"]))
        formulation.addMotionTask(task, f["weight"], 1, 0.0)
        keep.append(task)
    posture = tsid.TaskJointPosture("posture", robot)
    posture.setKp(p["posture"]["kp"] * np.ones(robot.na))
    posture.setKd(p["posture"]["kd"] * np.ones(robot.na))
    sample = tsid.TrajectorySample(robot.na)
    sample.value(np.array(p["posture"]["position"]))
    posture.setReference(sample)
    formulation.addMotionTask(posture, p["posture"]["weight"], 1, 0.0)
    keep.append(posture)
    if p["torque_limits"]:
        bounds = tsid.TaskActuationBounds("torques", robot)
        effort = model.effortLimit[6:]
        bounds.setBounds(-effort, effort)
        formulation.addActuationTask(bounds, 1.0, 0, 0.0)
        keep.append(bounds)
    limits = tsid.TaskJointBounds("joint bounds", robot, 1e-3)
    limits.setAccelerationBounds(np.array(p["acceleration_lower"]), np.array(p["acceleration_upper"]))
    formulation.addMotionTask(limits, 1.0, 0, 0.0)
    keep.append(limits)
    formulation.computeProblemData(0.0, q, v)
    solver = tsid.SolverHQuadProgFast("eiquadprog")
    solver.resize(formulation.nVar, formulation.nEq, formulation.nIn)
    return formulation, solver, q, v, (robot, keep)


def solve(p):
    formulation, solver, q, v, kept = build(p)
    solution = solver.solve(formulation.computeProblemData(0.0, q, v))
    return {"status": int(solution.status), "a": formulation.getAccelerations(solution).tolist(),
            "tau": formulation.getActuatorForces(solution).tolist(),
            "forces": {c["frame"]: formulation.getContactForce(c["frame"], solution).tolist() for c in p["contacts"]}}


if __name__ == "__main__":
    print(json.dumps(solve(json.load(sys.stdin))))
