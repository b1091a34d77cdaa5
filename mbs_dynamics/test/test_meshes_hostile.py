"""Hostile mesh files (meshes.py), each made here: a zip bomb posing as
COLLADA, a binary STL header claiming 10^8 triangles (and a sparse file as
large as it claims), a real STL, OBJ, PLY and COLLADA above the triangle cap,
coordinates and scales beyond the URDF's bound for lengths, an XXE entity,
a FIFO and a 64-megapixel texture named by an OBJ. Each is refused with a
message naming the file and the cap, in bounded CPU time and memory, by the
core loader, the contact geometry (skipped with a warning), the view (its
collision geometry drawn instead) and the simulator node, which starts and
keeps publishing."""
from __future__ import annotations

import math
import os
import re
import resource
import struct
import time
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import mbs_dynamics as mbs
import numpy as np
import pytest
import trimesh
from mbs_dynamics.contact.geometry import collision_contacts
from mbs_dynamics.files import FileProblem
from mbs_dynamics.multibody.meshes import (
    MAX_BYTES,
    MAX_TEXTURE_PIXELS,
    MAX_TRIANGLES,
    AssetResolver,
    load_mesh,
    measure,
)
from mbs_dynamics.view.visuals import COLLISION_RGBA, link_visuals

from ros_processes import executable, wait_for_node

# Generous bounds for one refusal: the files it refuses cost, unbounded,
# 27-57 s and 0.9-4.8 GB to parse; a refusal costs well under a second and
# the size of the file read.
CPU_SECONDS = 20.0
TRACED_BYTES = 200 * 2**20
COLLADA_HEAD = (b'<?xml version="1.0"?>\n<COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema" '
                b'version="1.4.1">\n')


# --- the hostile files --------------------------------------------------------

def zip_bomb(path: Path, megabytes: int = 300) -> Path:
    """A .dae that is a zip (as pycollada takes one) of a few hundred kB whose
    document unzips to `megabytes` MB."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("model.dae", "w", force_zip64=True) as member:
            member.write(COLLADA_HEAD)
            blank = b" " * 2**20
            for _ in range(megabytes):
                member.write(blank)
            member.write(b"</COLLADA>\n")
    return path


def liar_stl(path: Path, claimed: int = 10**8) -> Path:
    """A binary STL header claiming `claimed` triangles, ten of them there."""
    path.write_bytes(b"\0" * 80 + struct.pack("<I", claimed) + bytes(50 * 10))
    return path


def binary_stl(path: Path, triangles: np.ndarray) -> Path:
    """A binary STL of `triangles` (n, 3, 3)."""
    records = np.zeros(len(triangles), dtype=[("normal", "<f4", (3,)), ("corners", "<f4", (3, 3)), ("extra", "<u2")])
    records["corners"] = triangles
    with open(path, "wb") as stream:
        stream.write(b"\0" * 80 + struct.pack("<I", len(records)))
        stream.write(records.tobytes())
    return path


def large_stl(path: Path, triangles: int = MAX_TRIANGLES + 100_000) -> Path:
    """A real binary STL of `triangles` random triangles (55 MB at the default)."""
    corners = np.random.default_rng(0).random((triangles, 3, 3), dtype=np.float32)
    return binary_stl(path, corners)


def cube_stl(path: Path, half: float = 0.05) -> Path:
    box = trimesh.creation.box(extents=(2 * half,) * 3)
    return binary_stl(path, box.vertices[box.faces])


def obj_over_cap(path: Path) -> Path:
    path.write_bytes(b"v 0 0 0\nv 1 0 0\nv 0 1 0\n" + b"f 1 2 3\n" * (MAX_TRIANGLES + 1))
    return path


def ply_over_cap(path: Path) -> Path:
    faces = MAX_TRIANGLES + 1
    header = (b"ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
              b"property float z\nelement face %d\nproperty list uchar int vertex_indices\nend_header\n" % faces)
    face = struct.pack("<Biii", 3, 0, 1, 2)
    path.write_bytes(header + bytes(36) + face * faces)
    return path


def collada_over_cap(path: Path) -> Path:
    triangles = MAX_TRIANGLES + 1
    path.write_bytes(
        COLLADA_HEAD + b'<library_geometries><geometry id="g"><mesh>'
        b'<source id="s"><float_array id="a" count="9">0 0 0 1 0 0 0 1 0</float_array></source>'
        b'<vertices id="v"><input semantic="POSITION" source="#s"/></vertices>'
        b'<triangles count="%d"><input semantic="VERTEX" source="#v" offset="0"/><p>' % triangles
        + b"0 1 2 " * triangles + b"</p></triangles></mesh></geometry></library_geometries></COLLADA>\n")
    return path


def png_of_zeros(path: Path, side: int) -> Path:
    """A valid RGB PNG of side x side black pixels (compressed in rows)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    compressor, row = zlib.compressobj(9), bytes(1 + 3 * side)
    pixels = b"".join(compressor.compress(row) for _ in range(side)) + compressor.flush()
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", pixels) + chunk(b"IEND", b""))
    return path


def bounded(call):
    """(what call() raised, the CPU seconds and the most bytes traced it took)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    tracemalloc.start()
    try:
        try:
            call()
            raised = None
        except Exception as error:  # noqa: BLE001  returned to the test
            raised = error
        traced = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return raised, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), traced


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, Path]:
    """The hostile files, made once for the module."""
    directory = tmp_path_factory.mktemp("hostile_meshes")
    sparse = directory / "sparse.stl"  # as large as its header says (5 GB), on disk only a header
    liar_stl(sparse)
    os.truncate(sparse, 84 + 50 * 10**8)
    return {"zip bomb": zip_bomb(directory / "bomb.dae"), "liar": liar_stl(directory / "liar.stl"),
            "sparse": sparse, "large": large_stl(directory / "large.stl"),
            "obj": obj_over_cap(directory / "faces.obj"), "ply": ply_over_cap(directory / "faces.ply"),
            "collada": collada_over_cap(directory / "faces.dae"), "cube": cube_stl(directory / "cube.stl"),
            "kilometre cube": cube_stl(directory / "km_cube.stl", half=1000.0)}


REFUSALS = {
    "zip bomb": rf"bomb.dae is a zip whose model.dae unzips to 3145\d+ bytes, more than the {MAX_BYTES} \(64 MiB\)",
    "liar": r"liar.stl is no STL: its binary header counts 100000000 triangles \(5000000084 bytes\), it has 584 "
            r"bytes, and it does not begin with 'solid'",
    "sparse": rf"sparse.stl has 5000000084 bytes, more than the {MAX_BYTES} \(64 MiB\) it may have",
    "large": rf"large.stl has {MAX_TRIANGLES + 100_000} triangles, more than the {MAX_TRIANGLES} a mesh may have",
    "obj": rf"faces.obj has {MAX_TRIANGLES + 1} triangles, more than the {MAX_TRIANGLES}",
    "ply": rf"faces.ply has {MAX_TRIANGLES + 1} triangles, more than the {MAX_TRIANGLES}",
    "collada": rf"faces.dae has {MAX_TRIANGLES + 1} triangles, more than the {MAX_TRIANGLES}",
}


# --- the core loader ------------------------------------------------------------

@pytest.mark.parametrize("kind", list(REFUSALS))
def test_a_mesh_beyond_a_cap_is_refused_before_parsing(hostile, kind):
    """Measured and loaded: refused, naming the file and the cap, within
    bounded CPU time and traced memory (the zip bomb's 300 MB never made)."""
    for call in (measure, load_mesh):
        raised, seconds, traced = bounded(lambda: call(hostile[kind]))  # noqa: B023
        assert isinstance(raised, FileProblem), raised
        message = str(raised)
        assert message.startswith("mesh file ") and "\n" not in message
        assert re.search(REFUSALS[kind], message), message
        assert seconds < CPU_SECONDS and traced < TRACED_BYTES, (kind, seconds, traced / 2**20)


def test_a_mesh_within_the_caps_loads_as_before(hostile, tmp_path):
    """A real mesh loads as trimesh loads it (a zipped COLLADA too); a mesh of
    exactly MAX_TRIANGLES is measured without refusal."""
    cube = load_mesh(hostile["cube"])
    assert len(cube.faces) == 12 and np.allclose(np.abs(cube.vertices), 0.05)
    collada = tmp_path / "cube.dae"
    trimesh.creation.box(extents=(0.1, 0.2, 0.3)).export(collada)
    zipped = tmp_path / "zipped.dae"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(collada, "inside/cube.dae")
    for path in (collada, zipped):
        mesh = load_mesh(path)
        assert len(mesh.faces) == 12 and np.allclose(mesh.extents, (0.1, 0.2, 0.3))
        assert measure(path).triangles == 12
    at_cap = tmp_path / "at_cap.stl"
    at_cap.write_bytes(b"\0" * 80 + struct.pack("<I", MAX_TRIANGLES) + bytes(50 * MAX_TRIANGLES))
    assert measure(at_cap).triangles == MAX_TRIANGLES


@pytest.mark.parametrize("name, content, says", [
    ("model.3ds", b"\0" * 100, "'.3ds' is not a mesh format read here (STL, OBJ, PLY, COLLADA .dae)"),
    ("laughs.dae", b'<?xml version="1.0"?><!DOCTYPE COLLADA [<!ENTITY a0 "xxxxxxxxxx">'
     + b"".join(b'<!ENTITY a%d "%s">' % (i, b"&a%d;" % (i - 1) * 10) for i in range(1, 10))
     + b']><COLLADA><asset><contributor><author>&a9;</author></contributor></asset></COLLADA>',
     "is not COLLADA (XML): Maximum entity amplification factor exceeded"),
    ("header.ply", b"ply\nformat ascii 1.0\nelement vertex 1000000000\nproperty float x\nend_header\n",
     "has 1000000000 PLY vertex elements, more than the 3000000"),
    ("far.stl", None, "has coordinates that are not finite or beyond 1e+12"),
])
def test_other_hostile_mesh_files_are_refused_in_one_line(tmp_path, name, content, says):
    path = tmp_path / name
    if content is None:
        binary_stl(path, np.array([[[0, 0, 0], [1e30, 0, 0], [0, 1e30, 0]]], dtype=np.float32))
    else:
        path.write_bytes(content)
    with pytest.raises(FileProblem) as raised:
        load_mesh(path)
    assert says in str(raised.value) and str(path) in str(raised.value)


def test_files_a_mesh_names_are_read_only_from_its_directory_and_bounded(tmp_path):
    """An OBJ naming, as its material library, a FIFO beside it (which
    trimesh's own resolver would wait on for ever) and a texture of 64
    megapixels (a 200 kB PNG of 200 MB of pixels; only its header read),
    loads without them; names
    leading out of its directory are refused; an XXE entity is not read."""
    (tmp_path / "secret.txt").write_text("SECRET-1234")
    meshes = tmp_path / "meshes"
    meshes.mkdir()
    os.mkfifo(meshes / "fifo.mtl")
    side = 8192
    png_of_zeros(meshes / "huge.png", side)
    (meshes / "textured.mtl").write_text("newmtl skin\nKd 1 0 0\nmap_Kd huge.png\n")
    triangle = "v 0 0 0\nv 1 0 0\nv 0 1 0\nvt 0 0\nvt 1 0\nvt 0 1\n"
    (meshes / "fifo.obj").write_text("mtllib fifo.mtl\n" + triangle + "f 1 2 3\n")
    (meshes / "textured.obj").write_text("mtllib textured.mtl\nusemtl skin\n" + triangle + "f 1/1 2/2 3/3\n")
    raised, seconds, _ = bounded(lambda: load_mesh(meshes / "fifo.obj"))
    assert raised is None and seconds < CPU_SECONDS
    assert len(load_mesh(meshes / "fifo.obj").faces) == 1
    textured = load_mesh(meshes / "textured.obj")
    assert getattr(getattr(textured.visual, "material", None), "image", None) is None  # the texture left out

    resolver = AssetResolver(meshes / "fifo.obj")
    with pytest.raises(FileProblem, match="not a regular file"):
        resolver.get("fifo.mtl")
    with pytest.raises(FileProblem, match=f"has {side} x {side} pixels, more than the {MAX_TEXTURE_PIXELS}"):
        resolver.get("huge.png")
    for outside in ("../secret.txt", str(tmp_path / "secret.txt"), "/etc/passwd"):
        with pytest.raises(FileNotFoundError):
            resolver.get(outside)

    xxe = meshes / "xxe.dae"
    xxe.write_bytes(b'<?xml version="1.0"?><!DOCTYPE COLLADA [<!ENTITY x SYSTEM "file://%s">]>'
                    % str(tmp_path / "secret.txt").encode() + COLLADA_HEAD.split(b"\n", 1)[1]
                    + b"<asset><contributor><author>&x;</author></contributor></asset></COLLADA>")
    with pytest.raises(FileProblem) as refused:
        load_mesh(xxe)
    assert "SECRET" not in str(refused.value)


# --- the contact geometry and the view ----------------------------------------------

def robot_with(meshes: dict[str, str], base: str = "box") -> str:
    """The bundled quadruped, its base link given one collision element per
    entry (name -> <mesh .../> element)."""
    urdf = Path(mbs.bundled_robot("quadruped")).read_text()
    extra = "".join(f'\n    <collision name="{name}"><geometry>{mesh}</geometry></collision>'
                    for name, mesh in meshes.items())
    start = urdf.index('<link name="base_link">')
    end = urdf.index("</link>", start)
    return urdf[:end] + extra + "\n  " + urdf[end:]


def hostile_collisions(hostile) -> dict[str, str]:
    elements = {kind: f'<mesh filename="file://{hostile[kind]}"/>' for kind in REFUSALS}
    elements["huge scale"] = f'<mesh filename="file://{hostile["cube"]}" scale="1e200 1e200 1e200"/>'
    elements["far"] = f'<mesh filename="file://{hostile["kilometre cube"]}" scale="1e10 1e10 1e10"/>'
    elements["cube"] = f'<mesh filename="file://{hostile["cube"]}"/>'
    return elements


def test_the_contact_geometry_skips_hostile_meshes_and_keeps_the_rest(hostile):
    """Each hostile collision mesh is skipped with its one-line warning; a
    scale of 1e200 (the robot fell to -738 m with it) and points 1e13 m out
    are refused; the cube and the robot's own shapes keep their points, all
    finite and near the robot."""
    urdf = robot_with(hostile_collisions(hostile))
    model = mbs.Model.from_urdf_string(urdf, floating_base=True)
    raised, seconds, traced = bounded(lambda: collision_contacts(model, urdf))
    assert raised is None and seconds < 3 * CPU_SECONDS and traced < TRACED_BYTES, (seconds, traced / 2**20)
    geometry = collision_contacts(model, urdf)
    expected = [*REFUSALS, "huge scale", "far"]
    warnings = {name: warning for name in expected for warning in geometry.warnings
                if re.match(rf"link 'base_link' collision {name}\b", warning)}
    assert sorted(warnings) == sorted(expected) and len(geometry.warnings) == len(expected), geometry.warnings
    for kind, pattern in REFUSALS.items():
        assert re.search(pattern, warnings[kind]) and warnings[kind].endswith("; skipped"), warnings[kind]
    assert "mesh scale must be 3 numbers of magnitude at most 1e+12, got '1e200 1e200 1e200'" in warnings["huge scale"]
    assert "its points reach 1e+13 m from the link frame, beyond 1e+12 m" in warnings["far"], warnings["far"]
    names = {name.split("/")[1] for name in geometry.names if name.startswith("base_link/")}
    assert names == {"0", "cube"}
    assert np.all(np.isfinite(geometry.points)) and np.abs(geometry.points).max() < 1.0


def test_the_view_draws_the_collision_geometry_of_a_visual_beyond_a_cap(hostile):
    """A visual mesh beyond a cap gives way to the link's collision
    geometry, said in one warning naming the file and the cap, as a
    missing mesh does; the Viewer draws the rest."""
    from mbs_dynamics.view.viewer import Viewer

    urdf = Path(mbs.bundled_robot("quadruped")).read_text().replace(  # the base's visual, its first box
        '<visual>\n      <geometry><box size="0.42 0.22 0.1"/></geometry>',
        f'<visual>\n      <geometry><mesh filename="file://{hostile["zip bomb"]}"/></geometry>', 1)
    model = mbs.Model.from_urdf_string(urdf, floating_base=True)
    visuals, warnings = link_visuals(model, urdf)
    assert len(warnings) == 1, warnings
    assert "bomb.dae is a zip whose model.dae unzips to" in warnings[0]
    assert warnings[0].endswith("its collision geometry is drawn instead")
    base = [visual for visual in visuals if visual.name.startswith("base_link/")]
    assert [visual.name for visual in base] == ["base_link/collision 0"] and base[0].rgba == COLLISION_RGBA
    viewer = Viewer(model, urdf, port=0)
    try:
        assert len(viewer.drawn) == len(visuals) and viewer.warnings == list(warnings)
    finally:
        viewer.close()


# --- the simulator node -------------------------------------------------------------

def peak_memory_bytes(pid: int) -> int:
    """The most resident memory the process has had (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_the_simulator_node_skips_hostile_collision_meshes_and_simulates(hostile, tmp_path, start_process, test_node):
    """The quadruped with every hostile collision mesh on its base, in the
    simulator node with contact_geometry 'collision': one warning line for
    each, naming the file and the cap; it simulates, stands on its feet (the
    robot's own collision spheres) and keeps publishing; its memory stays
    that of a simulator (the zip bomb alone took 4.4 GB)."""
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    urdf = tmp_path / "hostile_quadruped.urdf"
    urdf.write_text(robot_with(hostile_collisions(hostile)))
    joints = [name for name in mbs.Model.from_urdf_file(urdf).joint_names]
    namespace = f"/hostile_meshes_{os.getpid()}"  # the machine may run other ROS tests in the same domain
    node = start_process([executable("simulator_node"), "--ros-args", "-r", "__node:=hostile_sim",
                          "-r", f"__ns:={namespace}",
                          "-p", f"robot_description_file:={urdf}", "-p", "floating_base:=true",
                          "-p", "initial_base_pose:=[0.0, 0.0, 0.42, 0.0, 0.0, 0.0, 1.0]",
                          "-p", f"position_joints:={joints}"])
    node.wait_for(r"hostile_sim\]: simulating", 120)
    lines = [line for line in node.lines if "collision geometry:" in line]
    for kind, pattern in REFUSALS.items():
        assert any(re.search(pattern, line) for line in lines), (kind, node.output)
    assert any("mesh scale must be 3 numbers of magnitude at most 1e+12" in line for line in lines)
    assert len(lines) == len(REFUSALS) + 2, node.output
    assert "Traceback" not in node.output
    wait_for_node(test_node, "hostile_sim")
    heights = []
    test_node.create_subscription(Odometry, f"{namespace}/odom", lambda m: heights.append(m.pose.pose.position.z),
                                  QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT))
    deadline = time.monotonic() + 60
    while len(heights) < 200 and time.monotonic() < deadline:
        rclpy.spin_once(test_node, timeout_sec=0.05)
    assert len(heights) >= 200, node.output
    assert all(math.isfinite(z) and 0.3 < z < 0.5 for z in heights), heights[-10:]  # standing, not falling
    assert node.process.poll() is None
    assert peak_memory_bytes(node.process.pid) < 1.5 * 2**30
    assert node.interrupt() == 0
