"""Mesh files (STL, OBJ, PLY, COLLADA .dae) read with bounds: the one loader
of the contact geometry (contact_geometry.py) and the view (viewer.py).

A URDF may name any file, so a mesh file is measured before trimesh parses
it (measure) and refused, with a FileProblem naming it and the cap, when it
is not a regular file, not one of the four formats, or beyond a cap:

    MAX_BYTES      the file; a COLLADA file that is a zip: the document in it,
                   unzipped (its size from the zip's directory, and no more
                   is unzipped than that)
    MAX_TRIANGLES  triangles, counted without parsing: a binary STL's header,
                   an ASCII STL's vertices, an OBJ's face lines, a PLY's
                   header and the size of its face lists, the index lists
                   of a COLLADA document's primitives
    MAX_VERTICES   vertices, likewise (an OBJ's `v` lines, a PLY's elements,
                   a COLLADA document's float arrays / 3)

Parsing is proportional to these: at the caps trimesh takes seconds and a
few hundred MB, where an unbounded file took minutes and gigabytes. trimesh
then parses the bytes that were measured (never the path again), the files
they name (an OBJ's .mtl, textures) taken only from the mesh's own directory,
each a regular file of at most MAX_BYTES and an image of at most
MAX_TEXTURE_PIXELS (a larger one is left out), or none at all
(materials=False); the parsed mesh is checked again (counts, coordinates
finite and within MAX_MAGNITUDE, the URDF's bound for lengths).
"""
from __future__ import annotations

import io
import re
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mbs_dynamics.files import FileProblem, read_file
from mbs_dynamics.multibody.parsers.urdf import MAX_MAGNITUDE

# The largest mesh file, and unzipped COLLADA document (bytes): the largest
# mesh of example-robot-data is a 29 MB COLLADA file.
MAX_BYTES = 64 * 2**20
# The most triangles and vertices of a mesh: example-robot-data's largest has
# 351,394 triangles (830,207 vertices as its COLLADA file lists them).
MAX_TRIANGLES = 1_000_000
MAX_VERTICES = 3 * MAX_TRIANGLES
# The most pixels of a texture image (16 MP: 4096 x 4096).
MAX_TEXTURE_PIXELS = 4096 * 4096
FORMATS = ("stl", "obj", "ply", "dae")
WHAT = "mesh file"


@dataclass(frozen=True)
class MeshSize:
    """What measure found: the format, the document's size (bytes: a zipped
    COLLADA's unzipped), and at most how many triangles and vertices it
    holds."""

    format: str
    bytes: int
    triangles: int
    vertices: int


def mesh_format(path) -> str:
    """The format of a mesh file by its name ("stl", "obj", "ply", "dae");
    FileProblem for another."""
    kind = Path(path).suffix.lower().lstrip(".")
    if kind not in FORMATS:
        raise FileProblem(f"{WHAT} {path}: '{Path(path).suffix}' is not a mesh format read here "
                          f"(STL, OBJ, PLY, COLLADA .dae)")
    return kind


def measure(path) -> MeshSize:
    """The MeshSize of the mesh file at `path` once it is within the caps
    (module docstring); FileProblem naming the file and the cap otherwise.
    Parses nothing: it reads the file and counts."""
    return _document(Path(path))[1]


def load_mesh(path, materials: bool = True):
    """The trimesh.Trimesh of the mesh file at `path` (its parts in one
    mesh), measured before parsing and checked after (module docstring);
    FileProblem, naming the file and why, when it is beyond a cap or cannot
    be read. materials: read the materials and textures it names (from its
    own directory), else none."""
    import trimesh

    path = Path(path)
    document, size = _document(path)
    resolver = AssetResolver(path) if materials else None
    try:
        with np.errstate(all="ignore"):  # a hostile file's overflows: its coordinates are checked below
            mesh = trimesh.load(io.BytesIO(document), file_type=size.format, resolver=resolver, force="mesh")
    except Exception as error:  # noqa: BLE001  trimesh and its parsers raise many kinds for a bad file
        raise FileProblem(f"{WHAT} {path} cannot be read ({type(error).__name__}: {error})") from None
    if not isinstance(mesh, trimesh.Trimesh):
        raise FileProblem(f"{WHAT} {path} holds no mesh")
    _within(path, len(mesh.faces), len(mesh.vertices))
    vertices = np.asarray(mesh.vertices)
    if not np.all(np.isfinite(vertices)) or (vertices.size and np.abs(vertices).max() > MAX_MAGNITUDE):
        raise FileProblem(f"{WHAT} {path} has coordinates that are not finite or beyond {MAX_MAGNITUDE:g}")
    return mesh


class AssetResolver:
    """The files a mesh names (an OBJ's .mtl, textures), for trimesh: only
    from the mesh's directory (trimesh's rule: a name that leads out of it is
    refused, else its last part is looked up there), each read as files.read_file
    reads (a regular file of at most MAX_BYTES); an image larger than
    MAX_TEXTURE_PIXELS is refused. trimesh leaves out what is refused."""

    def __init__(self, mesh_path: Path):
        self.parent = Path(mesh_path).resolve().parent
        self.file_name = Path(mesh_path).name

    def get(self, name: str) -> bytes:
        name = name.strip()
        for candidate in (name, name.lstrip("/"), Path(name).name):
            path = (self.parent / candidate).resolve()
            if path.is_relative_to(self.parent) and path.exists():
                data = read_file(path, "mesh asset", MAX_BYTES, text=False)
                _check_image(path, data)
                return data
        raise FileNotFoundError(f"{name}: not in {self.parent}")

    def __getitem__(self, name: str) -> bytes:
        return self.get(name)

    def get_base(self) -> Path:
        return self.parent

    def keys(self):
        return iter(())

    def namespaced(self, namespace: str):
        return self

    def write(self, name, data):
        raise OSError("mesh assets are read only")


def _check_image(path: Path, data: bytes) -> None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:  # reads the header only
            width, height = image.size
    except Image.DecompressionBombError as error:
        raise FileProblem(f"texture {path}: {error}") from None
    except (UnidentifiedImageError, Exception):  # noqa: BLE001  not an image (a .mtl), or one trimesh will not read
        return
    if width * height > MAX_TEXTURE_PIXELS:
        raise FileProblem(f"texture {path} has {width} x {height} pixels, more than the {MAX_TEXTURE_PIXELS} "
                          "a texture may have")


# --- measuring ------------------------------------------------------------------

def _within(path: Path, triangles: int, vertices: int) -> None:
    if triangles > MAX_TRIANGLES:
        raise FileProblem(f"{WHAT} {path} has {triangles} triangles, more than the {MAX_TRIANGLES} a mesh may have")
    if vertices > MAX_VERTICES:
        raise FileProblem(f"{WHAT} {path} has {vertices} vertices, more than the {MAX_VERTICES} a mesh may have")


def _document(path: Path) -> tuple[bytes, MeshSize]:
    """(the bytes trimesh is to parse, their MeshSize) of a mesh file."""
    kind = mesh_format(path)
    content = read_file(path, WHAT, MAX_BYTES, text=False)
    if kind == "dae":
        content = _collada_document(path, content)
    elif kind == "obj" or (kind == "stl" and _binary_stl_triangles(content) is None):
        if kind == "stl":
            _ascii_stl(path, content)
        # text that trimesh would decode by a guessed encoding (UTF-16...) and so read other than counted
        content = content.decode("utf-8", "replace").encode("utf-8")
    triangles, vertices = {"stl": _stl_counts, "obj": _obj_counts, "ply": _ply_counts,
                           "dae": _collada_counts}[kind](path, content)
    _within(path, triangles, vertices)
    return content, MeshSize(kind, len(content), triangles, vertices)


def count_tokens(text: bytes, chunk: int = 1 << 22) -> int:
    """The number of whitespace-separated words in `text`, counted in chunks
    (a few MB of scratch memory, whatever its length)."""
    count, after_space = 0, True
    view = memoryview(text)
    for start in range(0, len(view), chunk):
        piece = np.frombuffer(view[start:start + chunk], dtype=np.uint8)
        space = piece <= 32  # blanks, line ends and control characters
        starts = ~space
        starts[1:] &= space[:-1]
        starts[0] &= after_space
        count += int(np.count_nonzero(starts))
        after_space = bool(space[-1])
    return count


def _binary_stl_triangles(content: bytes) -> int | None:
    """The triangles of a binary STL (trimesh's test: 84 bytes of header,
    then 50 per triangle as the header counts), None if it is not one."""
    if len(content) < 84:
        return None
    (claimed,) = struct.unpack("<I", content[80:84])
    return claimed if len(content) == 84 + 50 * claimed else None


def _ascii_stl(path: Path, content: bytes) -> None:
    """FileProblem unless `content`, no binary STL, begins as an ASCII STL does."""
    if not content.lstrip()[:5].lower() == b"solid":
        claimed = struct.unpack("<I", content[80:84])[0] if len(content) >= 84 else 0
        raise FileProblem(f"{WHAT} {path} is no STL: its binary header counts {claimed} triangles "
                          f"({84 + 50 * claimed} bytes), it has {len(content)} bytes, and it does not "
                          "begin with 'solid' as an ASCII STL does")


def _stl_counts(path: Path, content: bytes) -> tuple[int, int]:
    """A binary STL or an ASCII one (3 `vertex` lines per triangle)."""
    triangles = _binary_stl_triangles(content)
    if triangles is not None:
        return triangles, 3 * triangles
    vertices = content.lower().count(b"vertex")
    return vertices // 3, vertices


def _obj_counts(path: Path, content: bytes) -> tuple[int, int]:
    """`v` lines, and the triangles of the `f` lines (a polygon of k corners
    is k - 2 triangles), in the text as trimesh reads it."""
    text = b"\n" + content.strip().replace(b"\r\n", b"\n").replace(b"\\\n", b"") + b"\n"
    vertices = text.count(b"\nv ")
    polygons = text.count(b"\nf ")
    _within(path, polygons, vertices)  # before the slower count of the corners
    triangles = 0
    for match in re.finditer(rb"\nf ([^\n]*)", text):
        line = match.group(1)
        triangles += max((len(line.split()) if len(line) < 4096 else count_tokens(line)) - 2, 0)
    return triangles, vertices


PLY_SIZES = {"char": 1, "uchar": 1, "int8": 1, "uint8": 1, "short": 2, "ushort": 2, "int16": 2, "uint16": 2,
             "int": 4, "uint": 4, "int32": 4, "uint32": 4, "float": 4, "float32": 4, "double": 8, "float64": 8}


def _ply_counts(path: Path, content: bytes) -> tuple[int, int]:
    """From the header: each element's count (vertex, face, ...); the
    triangles of the faces from the size of the lists after the header (the
    words of an ASCII body, the bytes of a binary one): the corners of all
    lists, less 2 per face."""
    end = content.find(b"end_header")
    if not content.startswith(b"ply") or end < 0:
        raise FileProblem(f"{WHAT} {path} is no PLY: no 'ply' ... 'end_header' header")
    body = content[content.find(b"\n", end) + 1:] if content.find(b"\n", end) >= 0 else b""
    binary = b"binary" in content[:end]
    elements: list[list] = []  # [name, count, fixed size (bytes or words), [(count size, entry size)] of lists]
    for line in content[:end].decode("latin-1").splitlines():
        words = line.split()
        try:
            if words[:1] == ["element"]:
                elements.append([words[1], int(words[2]), 0, []])
            elif words[:1] == ["property"] and elements:
                if words[1] == "list":
                    elements[-1][3].append((PLY_SIZES[words[2]] if binary else 1, PLY_SIZES[words[3]] if binary else 1))
                else:
                    elements[-1][2] += PLY_SIZES[words[1]] if binary else 1
        except (IndexError, KeyError, ValueError):
            raise FileProblem(f"{WHAT} {path}: PLY header line {line.strip()!r} is malformed") from None
    lines = sum(count for _, count, _, _ in elements)
    for name, count, _, _ in elements:
        if count < 0 or count > MAX_VERTICES:
            raise FileProblem(f"{WHAT} {path} has {count} PLY {name} elements, more than the {MAX_VERTICES} a mesh "
                              "may have")
    if not binary and lines > MAX_TRIANGLES:  # trimesh reads an ASCII body line by line: ~10 us and 500 bytes each
        raise FileProblem(f"{WHAT} {path} is an ASCII PLY of {lines} elements (lines), more than the {MAX_TRIANGLES} "
                          "it may have (a binary PLY may have more)")
    vertices = sum(count for name, count, _, _ in elements if name == "vertex")
    faces = sum(count for name, count, _, _ in elements if name == "face")
    fixed = sum(count * (size + sum(count_size for count_size, _ in lists)) for _, count, size, lists in elements)
    entry = min([entry for *_, lists in elements for _, entry in lists], default=1)
    corners = max((len(body) if binary else count_tokens(body)) - fixed, 0) // entry
    triangles = max(corners - 2 * faces, faces)
    return triangles, vertices


def _collada_document(path: Path, content: bytes) -> bytes:
    """The COLLADA document: the file, or where it is a zip (as pycollada
    takes it), its first .dae member unzipped, at most MAX_BYTES."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except (zipfile.BadZipFile, ValueError, OSError):
        return content
    try:
        members = [info for info in archive.infolist() if info.filename.upper().endswith(".DAE")]
        members.sort(key=lambda info: "MACOSX" in info.filename)
        if not members:
            raise FileProblem(f"{WHAT} {path} is a zip without a .dae document")
        member = members[0]
        if member.file_size > MAX_BYTES:
            raise FileProblem(f"{WHAT} {path} is a zip whose {member.filename} unzips to {member.file_size} bytes, "
                              f"more than the {MAX_BYTES} ({MAX_BYTES / 2**20:.0f} MiB) it may have")
        with archive.open(member) as stream:
            document = stream.read(MAX_BYTES + 1)
    except FileProblem:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, ValueError, OSError,
            EOFError) as error:
        raise FileProblem(f"{WHAT} {path} is a zip that cannot be unzipped ({type(error).__name__}: {error})") from None
    finally:
        archive.close()
    if len(document) > MAX_BYTES:
        raise FileProblem(f"{WHAT} {path} is a zip whose document unzips to more than {MAX_BYTES} bytes")
    return document


COLLADA_PRIMITIVES = ("triangles", "polylist", "polygons", "tristrips", "trifans")


def _collada_counts(path: Path, document: bytes) -> tuple[int, int]:
    """Triangles of the primitives (their index lists <p> in words, per input
    offset; a polygon, strip or fan of k corners is k - 2 triangles) and
    the float arrays' numbers / 3, read element by element (lxml, entities
    and the network off)."""
    from lxml import etree

    triangles, floats = 0, 0
    try:
        for _, element in etree.iterparse(io.BytesIO(document), events=("end",), huge_tree=True,
                                          resolve_entities=False, no_network=True, load_dtd=False):
            tag = etree.QName(element).localname if isinstance(element.tag, str) else ""
            if tag == "float_array":
                floats += count_tokens(_text(element))
            elif tag in COLLADA_PRIMITIVES:
                stride = 1 + max([int(child.get("offset", 0)) for child in element
                                  if isinstance(child.tag, str) and etree.QName(child).localname == "input"],
                                 default=0)
                lists = [count_tokens(_text(child)) // max(stride, 1) for child in element
                         if isinstance(child.tag, str) and etree.QName(child).localname in ("p", "ph")]
                if tag == "triangles":
                    triangles += sum(lists) // 3
                elif tag == "polylist":
                    polygons = sum(count_tokens(_text(child)) for child in element
                                   if isinstance(child.tag, str) and etree.QName(child).localname == "vcount")
                    triangles += max(sum(lists) - 2 * polygons, 0)
                else:
                    triangles += sum(max(corners - 2, 0) for corners in lists)
            else:
                continue
            element.clear()
            if triangles > MAX_TRIANGLES or floats > 3 * MAX_VERTICES:
                break
    except (etree.XMLSyntaxError, ValueError) as error:
        raise FileProblem(f"{WHAT} {path} is not COLLADA (XML): {error}") from None
    return triangles, floats // 3


def _text(element) -> bytes:
    return (element.text or "").encode("latin-1", "replace")
