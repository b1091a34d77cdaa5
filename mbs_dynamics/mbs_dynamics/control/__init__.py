"""Whole-body control: task-space inverse dynamics as one quadratic program
per cycle (DESIGN.md §9), TSID's formulation on this package's dynamics.

    import mbs_dynamics as mbs
    from mbs_dynamics.control import (WholeBodyController, CenterOfMassTask, OrientationTask,
                                      PostureTask, RigidPointContact)
    controller = WholeBodyController(model)
    for foot in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"):
        controller.add_contact(RigidPointContact(foot, friction=0.7))
    com = controller.add_task(CenterOfMassTask(kp=100.0, weight=1.0))
    controller.add_task(OrientationTask(controller.base_frame, kp=100.0, weight=1.0))
    controller.add_task(PostureTask(kp=10.0, weight=1e-3))
    com.set_reference(position)            # world axes
    result = controller.compute(q, v)      # result.tau, result.a, result.forces, result.status
    controller.remove_contact("FL_FOOT")   # the foot may lift
    circle = CircleReference(position, radius=0.03, frequency=0.5)  # references.py: (p, v, a) at t
    com.set_reference(*circle.at(t))

Needs daqp (the QP solver), imported only by this subpackage.
"""
from mbs_dynamics.control.contacts import RigidContact, RigidPointContact, RigidSurfaceContact
from mbs_dynamics.control.controller import ControlResult, State, WholeBodyController
from mbs_dynamics.control.references import CircleReference, RestToRest, SwingTrajectory, Waypoints
from mbs_dynamics.control.support import SupportPolygon
from mbs_dynamics.control.tasks import CenterOfMassTask, FrameTask, OrientationTask, PostureTask, Task

__all__ = ["CenterOfMassTask", "CircleReference", "ControlResult", "FrameTask", "OrientationTask", "PostureTask",
           "RestToRest", "RigidContact", "RigidPointContact", "RigidSurfaceContact", "State", "SupportPolygon",
           "SwingTrajectory", "Task", "Waypoints", "WholeBodyController"]
