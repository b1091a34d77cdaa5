"""The simulator's stepping thread: the simulation stepped at dt, paced to
the real-time factor, in compiled calls of many steps (up to the next output
due, CALL_SECONDS at most, the lock held), the outputs due published from
one snapshot; ~/step requests taken while paused; any error counted, said
(throttled) and the simulation paused, the thread going on. In lockstep,
after each joint_states it waits for the next command (LOCKSTEP_WAIT at
most)."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import numpy as np

from mbs_dynamics.ros.robot_node import WARNING_PERIOD, timings
from mbs_dynamics.ros.simulator.outputs import JointStates, Snapshot
from mbs_dynamics.ros.simulator.parameters import MAX_LAG

# Wall-clock seconds a service waits for the simulation (a compiled call of steps) before it answers "busy".
SERVICE_WAIT = 2.0
# Wall-clock seconds the simulation may run ahead of its real-time factor
# before it sleeps. A sleep gives up the GIL, and getting it back from a busy
# executor thread can take the 5 ms switch interval: sleeping after every
# sub-millisecond step held the arm at 2x real time to 0.6x.
PACING_SLACK = 0.002
# The most steps one ~/step request takes (1000 s at dt = 1 ms).
MAX_STEPS_PER_REQUEST = 1_000_000
# Wall-clock seconds of the steps taken in one compiled call (from the last calls' step time), the lock held:
# a ~/pause or ~/reset ends a ~/step between calls, and a service waits at most about this long. Each call gives
# the GIL back and takes it again, which can wait for a switch interval: calls of 20 ms cost the Panda a third of
# its steps, of 100 ms nothing. A single step when nothing says how long a step takes (at start-up, after a
# change of the world or the actuators: 1000 boxes made a step of the Solo-12 70 ms).
CALL_SECONDS = 0.1
# Wall-clock seconds a lockstep simulator waits for the command answering a joint_states before stepping on.
LOCKSTEP_WAIT = 1.0
# Wall-clock seconds the stepping thread waits between calls, the lock released, while a service waits for it
# (and between the calls of a ~/step): the lock is not fair, and without it a waiting service would wait for
# the whole request.
LOCK_HANDOVER = 1e-4


class BusyError(RuntimeError):
    """A service the simulation could not serve within SERVICE_WAIT."""


class SteppingThread:
    """Steps node.simulation with node.effort(), publishes node.outputs.
    `lock` guards the simulation between the threads; `paused` stops the
    pacing (a ~/step still runs)."""

    def __init__(self, node, paused: bool, lockstep: bool = False):
        self.node = node
        self.lockstep = lockstep
        self._awaited = None  # lockstep: (commands counted before the last joint_states, its wall time)
        self.command_arrived = threading.Event()
        self.lock = threading.RLock()
        self.paused = paused
        self.step_times = timings()
        self._services_waiting = 0  # services waiting for the lock: the thread lets them in
        self._waiting_lock = threading.Lock()  # (of that count)
        self._steps_requested = 0  # steps the ~/step in progress still has to take
        self._steps_taken = 0  # and has taken
        self._steps_ended = None  # why it ended early, if it did
        self._steps_done = threading.Event()  # set when the ~/step in progress ends
        self._anchor = None  # (wall time, simulated time, real-time factor) the pacing counts from
        self.stopping = False  # the process is stopping: no ~/step is taken
        self._running = True
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="simulation", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._running = False
        self.end_steps("the node is shutting down")
        self._wake.set()
        self._thread.join(2.0)

    def wake(self) -> None:
        """Look again at once (the pause, a command, a request changed)."""
        self._wake.set()

    # --- the thread ----------------------------------------------------------

    def _run(self) -> None:
        node = self.node
        while self._running:
            try:
                self._pass()
            except Exception as error:  # noqa: BLE001  the thread must outlive anything
                if not node.context.ok():
                    break
                node.counts["thread_errors"] += 1
                node.get_logger().error(f"simulation thread: {type(error).__name__}: {error}; pausing",
                                        throttle_duration_sec=WARNING_PERIOD)
                self.paused = True
                self.end_steps(f"{type(error).__name__}: {error}")
                time.sleep(0.1)

    def _pass(self) -> None:
        """One pass of the thread: a call of steps, a wait, or (paused) a publication."""
        node = self.node
        simulation, settings = node.simulation, node.settings
        if self.paused and self._steps_requested == 0:
            self._anchor = self._awaited = None
            self.publish(while_paused=True)  # the state stays visible while paused
            self._wake.wait(1.0 / settings.publish_rate)
            self._wake.clear()
            return
        if self._awaited is not None and self._steps_requested == 0 and self._await_command():
            return
        factor = settings.real_time_factor
        if self._anchor is None or self._anchor[2] != factor:
            self._anchor = (time.monotonic(), simulation.time, factor)
        if factor > 0 and self._steps_requested == 0:  # a ~/step goes as fast as it can
            ahead = (simulation.time - self._anchor[1]) / factor - (time.monotonic() - self._anchor[0])
            if ahead > PACING_SLACK:
                time.sleep(min(ahead, 0.05))
                return
            if ahead < -MAX_LAG:  # behind after a stall: go on from here rather than race to catch up
                self._anchor = (time.monotonic(), simulation.time, factor)
        start = time.perf_counter()
        with self.lock:
            tau = node.effort()
            stepping = self._steps_requested > 0
            steps = min(self._steps_requested if stepping else self._steps_to_next_output(), self._steps_per_call(),
                        node.steps_to_stale_command())
            before = simulation.steps
            try:
                result = simulation.step(tau, steps)
            except ValueError as error:  # the state went bad (diverged, a singular mass matrix): stop there
                self._count_steps(simulation.steps - before)
                node.counts["simulation_errors"] += 1
                node.get_logger().error(f"the simulation stopped at t = {simulation.time:.3f} s: {error}; "
                                        "pausing (~/reset or ~/set_state to go on)")
                self.paused = True
                self.end_steps(f"the simulation stopped: {error}")
                return
            node.applied = result.applied
            node.counts["unconverged_steps"] += result.unconverged_steps
            node.counts["softened_steps"] += result.softened_steps
            self._count_steps(steps)
        self.step_times.append((time.perf_counter() - start) / steps)
        if not stepping:
            commands = node.counts["commands"]
            if self.publish() and self.lockstep:
                self._awaited = (commands, time.monotonic())
        elif self._steps_requested == 0:  # a ~/step publishes once, at its end
            self.publish(everything=True)
        if (stepping and self._steps_requested) or self._services_waiting:
            time.sleep(LOCK_HANDOVER)

    def _await_command(self) -> bool:
        """Lockstep: whether to wait on for the command answering the last joint_states (a short wait taken);
        once one came, or after LOCKSTEP_WAIT (counted, said), not."""
        node = self.node
        commands, published = self._awaited
        if node.counts["commands"] > commands:
            self._awaited = None
            return False
        waited = time.monotonic() - published
        if waited > LOCKSTEP_WAIT:
            self._awaited = None
            node.counts["lockstep_expired"] += 1
            node.get_logger().warning(
                f"lockstep: no command {waited:.2f} s after the joint_states of t = {node.simulation.time:.3f} s: "
                f"stepping on with the last ({node.counts['lockstep_expired']} so far)",
                throttle_duration_sec=WARNING_PERIOD)
            return False
        self.command_arrived.wait(0.01)
        self.command_arrived.clear()
        return True

    def _count_steps(self, steps: int) -> None:
        """steps taken: counted, and off the ~/step in progress (under the lock)."""
        self.node.counts["steps"] += steps
        if self._steps_requested:
            self._steps_requested -= min(steps, self._steps_requested)
            self._steps_taken += steps
            if self._steps_requested == 0:
                self._steps_done.set()

    def _steps_per_call(self) -> int:
        """The most steps in one call: CALL_SECONDS of them at the recent step
        time, one when nothing says how long a step takes."""
        if not self.step_times:
            return 1
        return max(1, int(CALL_SECONDS / max(self.step_times[-1], 1e-7)))

    def _steps_to_next_output(self) -> int:
        """Steps to take in one compiled call: up to the next output due (the
        commands apply from one call to the next)."""
        steps, dt = self.node.simulation.steps, self.node.simulation.dt
        return min(period - steps % period for period in (output.period(dt) for output in self.node.outputs))

    # --- publication -------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The simulation now, for the outputs."""
        node = self.node
        simulation = node.simulation
        with self.lock:
            last = simulation.last
            forces = simulation.contact_forces.copy()
            return Snapshot(
                model=node.model, world=simulation.world, time=simulation.time, q=simulation.q.copy(),
                v=simulation.v.copy(), applied=node.applied, contact_forces=forces,
                active=last.active[:len(forces)].copy() if last is not None else np.zeros(len(forces), bool),
                acceleration=last.acceleration.copy() if last is not None else np.zeros(node.model.nv),
                body_wrenches=last.body_wrenches.copy() if last is not None else None,
                objects=tuple((thing, *simulation.object_state(thing.name)) for thing in simulation.world.objects))

    def publish(self, everything: bool = False, while_paused: bool = False) -> bool:
        """The outputs due at this step (all of them; those published while paused); whether joint_states was."""
        node = self.node
        steps, dt = node.simulation.steps, node.simulation.dt
        due = [output for output in node.outputs
               if everything or (output.WHILE_PAUSED if while_paused else steps % output.period(dt) == 0)]
        if due:
            snapshot = self.snapshot()
            for output in due:
                output.publish(snapshot)
        return any(isinstance(output, JointStates) for output in due)

    # --- for the services --------------------------------------------------

    @contextmanager
    def service_lock(self):
        """The lock, for a service: BusyError after SERVICE_WAIT without it
        (the thread lets a waiting service in between its calls)."""
        with self._waiting_lock:
            self._services_waiting += 1
        try:
            taken = self.lock.acquire(timeout=SERVICE_WAIT)
        finally:
            with self._waiting_lock:
                self._services_waiting -= 1
        if not taken:
            self.node.counts["busy_refusals"] += 1
            raise BusyError(f"busy: the simulation did not give way within {SERVICE_WAIT:g} s (a step takes "
                            f"{self.step_times[-1] * 1e3 if self.step_times else float('nan'):.3g} ms); try again")
        try:
            yield
        finally:
            self.lock.release()

    def request_steps(self, steps: int) -> str | None:
        """Take `steps` steps while paused, as fast as they go; the refusal,
        or None once requested (BusyError if the lock is not given)."""
        with self.service_lock():
            refusal = ("the node is shutting down" if self.stopping
                       else "not paused: ~/pause first" if not self.paused
                       else "steps is 0" if steps == 0
                       else f"{steps} steps: at most {MAX_STEPS_PER_REQUEST} per request"
                       if steps > MAX_STEPS_PER_REQUEST
                       else f"busy: a ~/step is under way ({self._steps_requested} steps to go)"
                       if self._steps_requested else None)
            if refusal is None:
                self._steps_done.clear()
                self._steps_requested, self._steps_taken, self._steps_ended = steps, 0, None
        if refusal is None:
            self._wake.set()
        return refusal

    def wait_for_steps(self) -> tuple[int, str | None]:
        """(Steps taken, why they ended early or None) once the ~/step in
        progress ends (early at shutdown)."""
        while not self._steps_done.wait(0.1):
            if self.stopping or not (self._running and self.node.context.ok()):
                self.end_steps("the node is shutting down")
        with self.lock:
            return self._steps_taken, self._steps_ended

    def end_steps(self, why: str) -> None:
        """End the ~/step in progress, if any, early: it answers `why`."""
        with self.lock:
            if self._steps_requested:
                self._steps_requested, self._steps_ended = 0, why
                self._steps_done.set()
