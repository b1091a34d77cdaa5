"""mbs_dynamics_interfaces: every message and service type imports, survives a
round trip through the middleware's serialisation with every field set, and
every field of its definition is documented."""
from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path

import pytest

MESSAGES = ["BaseState", "CentroidalMomentum", "Contact", "ContactWrench", "ContactWrenches"]
SERVICES = ["DeleteObject", "DynamicsTerms", "ForwardDynamics", "Impact", "InverseDynamics", "InverseDynamicsTrajectory",
            "Rollout", "SetContacts", "SetState", "SpawnObject", "Step"]

SCALARS = {
    "boolean": True, "double": 1.25, "float": 0.5, "string": "link_a",
    "uint8": 1, "int8": -3, "uint16": 7, "int16": -7, "uint32": 42, "int32": -42,
    "uint64": 1 << 40, "int64": -(1 << 40),
}


def filled(message_class, depth: int = 0):
    """An instance with every field set to something other than its default."""
    message = message_class()
    for name, kind in message_class.get_fields_and_field_types().items():
        setattr(message, name, value_of(kind, depth))
    return message


def value_of(kind: str, depth: int):
    sequence = re.fullmatch(r"sequence<(.+?)(?:, (\d+))?>", kind)
    if sequence:
        element, bound = sequence.group(1), sequence.group(2)
        count = 1 if bound else 2
        values = [value_of(element, depth + 1) for _ in range(count)]
        if element in ("double", "float"):
            return [float(v) + i for i, v in enumerate(values)]
        return values
    if kind in SCALARS:
        return SCALARS[kind]
    package, name = kind.split("/")
    module = importlib.import_module(f"{package}.msg")
    return filled(getattr(module, name), depth + 1)


def test_message_types_round_trip():
    from rclpy.serialization import deserialize_message, serialize_message

    module = importlib.import_module("mbs_dynamics_interfaces.msg")
    for name in MESSAGES:
        message_class = getattr(module, name)
        message = filled(message_class)
        assert message != message_class(), name
        assert deserialize_message(serialize_message(message), message_class) == message, name


def test_service_types_round_trip():
    from rclpy.serialization import deserialize_message, serialize_message

    module = importlib.import_module("mbs_dynamics_interfaces.srv")
    for name in SERVICES:
        service = getattr(module, name)
        for part in (service.Request, service.Response):
            message = filled(part)
            assert message != part(), f"{name}.{part.__name__}"
            assert deserialize_message(serialize_message(message), part) == message, name


def test_contact_kinds_and_optional_fields():
    from mbs_dynamics_interfaces.msg import Contact
    from mbs_dynamics_interfaces.srv import ForwardDynamics, InverseDynamics

    assert (Contact.POINT, Contact.FRAME) == (0, 1)
    from mbs_dynamics_interfaces.msg import BaseState
    from rclpy.serialization import serialize_message

    request = ForwardDynamics.Request()
    assert list(request.base_state) == [] and list(request.base_wrench) == []
    # Optional = a sequence bounded to one element: a second one does not serialise.
    request.base_state = [BaseState(), BaseState()]
    with pytest.raises(Exception, match="serialize"):
        serialize_message(request)
    assert InverseDynamics.Request().accelerations.tolist() == []


def interface_share() -> Path:
    if os.environ.get("AMENT_PREFIX_PATH"):
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("mbs_dynamics_interfaces"))
    return Path(sys.prefix) / "share" / "mbs_dynamics_interfaces"


def definition_files():
    share = interface_share()
    return sorted(share.glob("msg/*.msg")) + sorted(share.glob("srv/*.srv"))


def test_every_field_of_every_definition_is_documented():
    files = definition_files()
    assert {f.stem for f in files} == set(MESSAGES + SERVICES)
    for path in files:
        lines = path.read_text().splitlines()
        for index, line in enumerate(lines):
            stripped = line.strip()
            if not stripped or stripped.startswith("#") or stripped == "---":
                continue
            # A field or constant: a comment on the lines just above it (its
            # block), or at the end of its own line.
            above = index - 1
            while above >= 0 and lines[above].strip() and not lines[above].strip().startswith("#"):
                above -= 1  # other fields of the same documented block
            documented = "#" in line or (above >= 0 and lines[above].strip().startswith("#"))
            assert documented, f"{path.name}: '{stripped}' has no comment"
