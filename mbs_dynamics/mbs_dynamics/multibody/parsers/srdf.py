"""What the simulator takes of a MoveIt SRDF (semantic robot description):
the link pairs that never collide (<disable_collisions link1= link2=>),
which MoveIt's setup assistant writes for links that touch at every
configuration or can never meet."""
from __future__ import annotations

from mbs_dynamics.multibody.parsers.urdf import robot_element

# The most characters of an SRDF (a large robot's is some 100 kB).
MAX_SRDF_CHARACTERS = 16 * 2**20


def disabled_collisions(srdf_xml: str) -> tuple[tuple[str, str], ...]:
    """The (link1, link2) pairs of the SRDF's <disable_collisions> elements,
    in order; ValueError when it is not an SRDF (not XML, no <robot> root,
    too large, or a pair without both links)."""
    if not isinstance(srdf_xml, str):
        raise ValueError(f"an SRDF must be XML text, got {type(srdf_xml).__name__}")
    if len(srdf_xml) > MAX_SRDF_CHARACTERS:
        raise ValueError(f"the SRDF has {len(srdf_xml)} characters: at most {MAX_SRDF_CHARACTERS}")
    robot = robot_element(srdf_xml, "SRDF")
    pairs = []
    for element in robot.iter("disable_collisions"):
        first, second = element.get("link1"), element.get("link2")
        if not first or not second:
            raise ValueError(f"the SRDF's <disable_collisions> {dict(element.attrib)} needs link1 and link2")
        pairs.append((first, second))
    return tuple(pairs)
