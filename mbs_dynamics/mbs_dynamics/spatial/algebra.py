"""Spatial algebra on flat arrays, compiled (RBDL §3, F&O §3, Müller kinematics App. A).

Motion vectors are [w; v] (angular first), force vectors [n; f]. A rigid
transform is kept as (R, p): rotation and translation of a child frame in its
parent, i.e. parent <- child. Then (RBDL eq. 2-4, with E = R^T, r = p):

    child <- parent on motion:  [R^T w; R^T (v - p x w)]
    parent <- child on force:   [R n + p x (R f); R f]

A spatial inertia is kept as (m, h = m c, I_O): mass, first moment and
rotational inertia about the frame origin (RBDL §7.3's compact form):
I [w; v] = [I_O w + h x v; m v - h x w].

The operators take and return 3- and 6-vectors as tuples (which the compiled
code keeps in registers), and read a transform or inertia from per-body arrays
by index, (R, p, i) for R[i], p[i]: a view per call would cost more than the
arithmetic. row and store move 6-vectors between tuples and arrays. Functions
on matrices write into `out` arguments; nothing allocates.
"""
import math

from numba import njit


@njit(cache=True, inline="always")
def rotation_about_axis(x, y, z, angle):
    """Rodrigues: the rotation by `angle` about the unit axis (x, y, z), nine
    scalars by rows (Müller kinematics eq. 69)."""
    c, s = math.cos(angle), math.sin(angle)
    t = 1.0 - c
    return (c + t * x * x, t * x * y - s * z, t * x * z + s * y,
            t * x * y + s * z, c + t * y * y, t * y * z - s * x,
            t * x * z - s * y, t * y * z + s * x, c + t * z * z)


@njit(cache=True, inline="always")
def quaternion_to_rotation(x, y, z, w):
    """The rotation matrix of a unit quaternion (x, y, z, w), nine scalars by rows."""
    return (1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w), 2.0 * (x * z + y * w),
            2.0 * (x * y + z * w), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w),
            2.0 * (x * z - y * w), 2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + y * y))


@njit(cache=True, inline="always")
def row(X, i):
    """X[i, :6] as a 6-tuple."""
    return X[i, 0], X[i, 1], X[i, 2], X[i, 3], X[i, 4], X[i, 5]


@njit(cache=True, inline="always")
def store(X, i, x):
    """X[i, :6] = x."""
    X[i, 0], X[i, 1], X[i, 2], X[i, 3], X[i, 4], X[i, 5] = x


@njit(cache=True, inline="always")
def store_add(X, i, x):
    """X[i, :6] += x."""
    for r in range(6):
        X[i, r] += x[r]


# The operators are inlined by numba (inline="always"), which costs compile time
# at every call site; add, add3 and cross are left to LLVM, which inlines
# them as well (measured: TALOS's forward dynamics, its mass matrix and the
# RNEA forms compile in 66 CPU-s with these three plain, 81 with all inlined,
# and run as fast either way; with every operator left to LLVM the RNEA runs
# 10 % slower).
@njit(cache=True)
def add(a, b):
    """a + b, 6-tuples."""
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4], a[5] + b[5]


@njit(cache=True)
def add3(a, b):
    """a + b, 3-tuples."""
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


@njit(cache=True)
def cross(a, b):
    """a x b, 3-tuples."""
    return a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]


@njit(cache=True, inline="always")
def rotate(R, i, x):
    """R[i] x, a 3-tuple."""
    return (R[i, 0, 0] * x[0] + R[i, 0, 1] * x[1] + R[i, 0, 2] * x[2],
            R[i, 1, 0] * x[0] + R[i, 1, 1] * x[1] + R[i, 1, 2] * x[2],
            R[i, 2, 0] * x[0] + R[i, 2, 1] * x[1] + R[i, 2, 2] * x[2])


@njit(cache=True, inline="always")
def rotate_back(R, i, x):
    """R[i]^T x, a 3-tuple."""
    return (R[i, 0, 0] * x[0] + R[i, 1, 0] * x[1] + R[i, 2, 0] * x[2],
            R[i, 0, 1] * x[0] + R[i, 1, 1] * x[1] + R[i, 2, 1] * x[2],
            R[i, 0, 2] * x[0] + R[i, 1, 2] * x[1] + R[i, 2, 2] * x[2])


@njit(cache=True, inline="always")
def motion_to_child(R, p, i, m):
    """^iX_λ m = [R^T w; R^T (v - p x w)] for (R, p) = (R[i], p[i]), parent <- child
    (RBDL eq. 2): a parent's motion vector in the child frame."""
    w = (m[0], m[1], m[2])
    x, y, z = p[i, 0], p[i, 1], p[i, 2]
    t = (m[3] - (y * m[2] - z * m[1]), m[4] - (z * m[0] - x * m[2]), m[5] - (x * m[1] - y * m[0]))
    return rotate_back(R, i, w) + rotate_back(R, i, t)


@njit(cache=True, inline="always")
def motion_to_parent(R, p, i, m):
    """^λX_i m = [R w; R v + p x (R w)]: a child's motion vector in the parent frame."""
    w = rotate(R, i, (m[0], m[1], m[2]))
    v = rotate(R, i, (m[3], m[4], m[5]))
    x, y, z = p[i, 0], p[i, 1], p[i, 2]
    return w + (v[0] + y * w[2] - z * w[1], v[1] + z * w[0] - x * w[2], v[2] + x * w[1] - y * w[0])


@njit(cache=True, inline="always")
def force_to_parent(R, p, i, f):
    """^λX_i^* f = [R n + p x (R f); R f] (RBDL eq. 4): a child's force vector in the parent frame."""
    n = rotate(R, i, (f[0], f[1], f[2]))
    g = rotate(R, i, (f[3], f[4], f[5]))
    x, y, z = p[i, 0], p[i, 1], p[i, 2]
    return (n[0] + y * g[2] - z * g[1], n[1] + z * g[0] - x * g[2], n[2] + x * g[1] - y * g[0]) + g


@njit(cache=True, inline="always")
def motion_cross(a, b):
    """a x b on motion vectors: [a_w x b_w; a_w x b_v + a_v x b_w] (crm(a) b, the Lie bracket [a, b])."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0],
            a[1] * b[5] - a[2] * b[4] + a[4] * b[2] - a[5] * b[1],
            a[2] * b[3] - a[0] * b[5] + a[5] * b[0] - a[3] * b[2],
            a[0] * b[4] - a[1] * b[3] + a[3] * b[1] - a[4] * b[0])


@njit(cache=True, inline="always")
def force_cross(a, f):
    """a x* f, a motion vector on a force vector: [a_w x n + a_v x f; a_w x f] (crf(a) f)."""
    return (a[1] * f[2] - a[2] * f[1] + a[4] * f[5] - a[5] * f[4],
            a[2] * f[0] - a[0] * f[2] + a[5] * f[3] - a[3] * f[5],
            a[0] * f[1] - a[1] * f[0] + a[3] * f[4] - a[4] * f[3],
            a[1] * f[5] - a[2] * f[4], a[2] * f[3] - a[0] * f[5], a[0] * f[4] - a[1] * f[3])


@njit(cache=True, inline="always")
def inertia_times(mass, first_moment, inertia, i, x, upper=False):
    """I_i x = [I_O w + h x l; m l - h x w] for x = [w; l] and the spatial inertia
    (m, h, I_O) = (mass[i], first_moment[i], inertia[i]) (RBDL §7.3). `upper`:
    I_O's upper triangle read alone (the same numbers for a symmetric I_O,
    whose lower triangle need not be kept: crba.composite_momenta's)."""
    m, I = mass[i], inertia[i]  # noqa: E741
    h0, h1, h2 = first_moment[i, 0], first_moment[i, 1], first_moment[i, 2]
    w0, w1, w2, l0, l1, l2 = x[0], x[1], x[2], x[3], x[4], x[5]
    I10, I20, I21 = (I[0, 1], I[0, 2], I[1, 2]) if upper else (I[1, 0], I[2, 0], I[2, 1])
    return (I[0, 0] * w0 + I[0, 1] * w1 + I[0, 2] * w2 + h1 * l2 - h2 * l1,
            I10 * w0 + I[1, 1] * w1 + I[1, 2] * w2 + h2 * l0 - h0 * l2,
            I20 * w0 + I21 * w1 + I[2, 2] * w2 + h0 * l1 - h1 * l0,
            m * l0 - (h1 * w2 - h2 * w1),
            m * l1 - (h2 * w0 - h0 * w2),
            m * l2 - (h0 * w1 - h1 * w0))


@njit(cache=True, inline="always")
def newton_euler(mass, first_moment, inertia, i, a, v):
    """I a + v x* I v (F&O eq. 3; M dV - ad^T_V M V of Müller dynamics eqs. 67a,
    71b): the wrench that gives body i, of inertia (inertia_times) in the frame
    and about the point of a and v, the acceleration a at the twist v."""
    return add(inertia_times(mass, first_moment, inertia, i, a),
               force_cross(v, inertia_times(mass, first_moment, inertia, i, v)))


@njit(cache=True, inline="always")
def spatial_inertia_matrix(m, h, I_O, out):  # noqa: N803
    """The 6x6 matrix of (m, h, I_O): [[I_O, h~], [h~^T, m 1]]."""
    I = I_O  # noqa: E741
    for r in range(3):
        for c in range(3):
            out[r, c] = I[r, c]
            out[3 + r, 3 + c] = m if r == c else 0.0
    out[0, 3], out[0, 4], out[0, 5] = 0.0, -h[2], h[1]
    out[1, 3], out[1, 4], out[1, 5] = h[2], 0.0, -h[0]
    out[2, 3], out[2, 4], out[2, 5] = -h[1], h[0], 0.0
    for r in range(3):
        for c in range(3):
            out[3 + r, c] = out[c, 3 + r]


@njit(cache=True, inline="always")
def rotated_block(R, M, bi, bj, work, symmetric):
    """work[bi:bi + 3, bj:bj + 3] = R M[bi:bi + 3, bj:bj + 3] R^T in two 3x3
    products, T = M_block R^T (in work[3:6, 0:3]) and then R T; symmetric: the
    upper triangle, mirrored."""
    for k in range(3):
        m0, m1, m2 = M[bi + k, bj], M[bi + k, bj + 1], M[bi + k, bj + 2]
        for c in range(3):
            work[3 + k, c] = m0 * R[c, 0] + m1 * R[c, 1] + m2 * R[c, 2]
    for r in range(3):
        for c in range(r if symmetric else 0, 3):
            value = R[r, 0] * work[3, c] + R[r, 1] * work[4, c] + R[r, 2] * work[5, c]
            work[bi + r, bj + c] = value
            if symmetric:
                work[bi + c, bj + r] = value


@njit(cache=True, inline="always")
def congruence_add(R, p, M, work, out):
    """out += X^T M X with X = ^iX_λ = [[R^T, 0], [-R^T p~, R^T]]: a symmetric 6x6
    inertia moved from a child frame to its parent (RBDL eq. 13). In two steps,
    without forming X: rotate the 3x3 blocks, M' = diag(R, R) M diag(R^T, R^T) =
    [[A, B], [B^T, C]], then shift by p: [[A - B p~ - (B p~)^T - p~ C p~, B + p~ C],
    [(B + p~ C)^T, C]]; the symmetric blocks by their upper triangles (out stays
    exactly symmetric). work: 6x6 scratch."""
    rotated_block(R, M, 0, 0, work, True)  # A
    rotated_block(R, M, 0, 3, work, False)  # B
    rotated_block(R, M, 3, 3, work, True)  # C
    p0, p1, p2 = p[0], p[1], p[2]
    for r in range(3):  # work[3 + r, 0:3] = row r of B p~
        b0, b1, b2 = work[r, 3], work[r, 4], work[r, 5]
        work[3 + r, 0] = b1 * p2 - b2 * p1
        work[3 + r, 1] = b2 * p0 - b0 * p2
        work[3 + r, 2] = b0 * p1 - b1 * p0
    for c in range(3):  # p~ C, column c: p x C[:, c]
        c0, c1, c2 = work[3, 3 + c], work[4, 3 + c], work[5, 3 + c]
        pc0 = p1 * c2 - p2 * c1
        pc1 = p2 * c0 - p0 * c2
        pc2 = p0 * c1 - p1 * c0
        out[0, 3 + c] += work[0, 3 + c] + pc0
        out[1, 3 + c] += work[1, 3 + c] + pc1
        out[2, 3 + c] += work[2, 3 + c] + pc2
        out[3 + c, 0] += work[0, 3 + c] + pc0
        out[3 + c, 1] += work[1, 3 + c] + pc1
        out[3 + c, 2] += work[2, 3 + c] + pc2
        for r in range(c + 1):
            value = work[3 + r, 3 + c]
            out[3 + r, 3 + c] += value
            if r != c:
                out[3 + c, 3 + r] += value
    for c in range(3):  # p~ C p~, column c: p x (C p~)[:, c], (C p~)[k, c] = row k of C times p~'s column c
        if c == 0:
            e0, e1, e2 = (p2 * work[3, 4] - p1 * work[3, 5], p2 * work[4, 4] - p1 * work[4, 5],
                          p2 * work[5, 4] - p1 * work[5, 5])
        elif c == 1:
            e0, e1, e2 = (p0 * work[3, 5] - p2 * work[3, 3], p0 * work[4, 5] - p2 * work[4, 3],
                          p0 * work[5, 5] - p2 * work[5, 3])
        else:
            e0, e1, e2 = (p1 * work[3, 3] - p0 * work[3, 4], p1 * work[4, 3] - p0 * work[4, 4],
                          p1 * work[5, 3] - p0 * work[5, 4])
        pcp = (p1 * e2 - p2 * e1, p2 * e0 - p0 * e2, p0 * e1 - p1 * e0)
        for r in range(c + 1):
            value = work[r, c] - work[3 + r, c] - work[3 + c, r] - pcp[r]
            out[r, c] += value
            if r != c:
                out[c, r] += value
