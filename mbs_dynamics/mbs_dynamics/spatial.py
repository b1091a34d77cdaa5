"""Spatial algebra on flat arrays, compiled (RBDL §3, F&O §3, Müller kinematics App. A).

Motion vectors are [w; v] (angular first), force vectors [n; f]. A rigid
transform is kept as (R, p): rotation and translation of a child frame in its
parent, i.e. parent <- child. Then (RBDL eq. 2-4, with E = R^T, r = p):

    child <- parent on motion:  [R^T w; R^T (v - p x w)]
    parent <- child on force:   [R n + p x (R f); R f]

A spatial inertia is kept as (m, h = m c, I_O): mass, first moment and
rotational inertia about the frame origin (RBDL §7.3's compact form):
I [w; v] = [I_O w + h x v; m v - h x w].

Every function writes into `out` arguments; nothing allocates.
"""
import math

from numba import njit


@njit(cache=True, inline="always")
def rotation_about_axis(axis, angle, out):
    """Rodrigues: rotation by `angle` about the unit `axis` (Müller kinematics eq. 69)."""
    c, s = math.cos(angle), math.sin(angle)
    t = 1.0 - c
    x, y, z = axis[0], axis[1], axis[2]
    out[0, 0] = c + t * x * x
    out[0, 1] = t * x * y - s * z
    out[0, 2] = t * x * z + s * y
    out[1, 0] = t * x * y + s * z
    out[1, 1] = c + t * y * y
    out[1, 2] = t * y * z - s * x
    out[2, 0] = t * x * z - s * y
    out[2, 1] = t * y * z + s * x
    out[2, 2] = c + t * z * z


@njit(cache=True, inline="always")
def quaternion_to_rotation(x, y, z, w, out):
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    out[0, 0] = 1.0 - 2.0 * (y * y + z * z)
    out[0, 1] = 2.0 * (x * y - z * w)
    out[0, 2] = 2.0 * (x * z + y * w)
    out[1, 0] = 2.0 * (x * y + z * w)
    out[1, 1] = 1.0 - 2.0 * (x * x + z * z)
    out[1, 2] = 2.0 * (y * z - x * w)
    out[2, 0] = 2.0 * (x * z - y * w)
    out[2, 1] = 2.0 * (y * z + x * w)
    out[2, 2] = 1.0 - 2.0 * (x * x + y * y)


@njit(cache=True, inline="always")
def motion_to_parent(R, p, m, out):
    """parent <- child on a motion vector: [R w; R v + p x (R w)]."""
    w0 = R[0, 0] * m[0] + R[0, 1] * m[1] + R[0, 2] * m[2]
    w1 = R[1, 0] * m[0] + R[1, 1] * m[1] + R[1, 2] * m[2]
    w2 = R[2, 0] * m[0] + R[2, 1] * m[1] + R[2, 2] * m[2]
    v0 = R[0, 0] * m[3] + R[0, 1] * m[4] + R[0, 2] * m[5]
    v1 = R[1, 0] * m[3] + R[1, 1] * m[4] + R[1, 2] * m[5]
    v2 = R[2, 0] * m[3] + R[2, 1] * m[4] + R[2, 2] * m[5]
    out[0], out[1], out[2] = w0, w1, w2
    out[3] = v0 + p[1] * w2 - p[2] * w1
    out[4] = v1 + p[2] * w0 - p[0] * w2
    out[5] = v2 + p[0] * w1 - p[1] * w0


@njit(cache=True, inline="always")
def force_to_parent_add(R, p, f, out):
    """out += parent <- child on a force vector: [R n + p x (R f); R f]."""
    f0 = R[0, 0] * f[3] + R[0, 1] * f[4] + R[0, 2] * f[5]
    f1 = R[1, 0] * f[3] + R[1, 1] * f[4] + R[1, 2] * f[5]
    f2 = R[2, 0] * f[3] + R[2, 1] * f[4] + R[2, 2] * f[5]
    for k in range(3):
        out[k] += R[k, 0] * f[0] + R[k, 1] * f[1] + R[k, 2] * f[2]
    out[0] += p[1] * f2 - p[2] * f1
    out[1] += p[2] * f0 - p[0] * f2
    out[2] += p[0] * f1 - p[1] * f0
    out[3] += f0
    out[4] += f1
    out[5] += f2


@njit(cache=True, inline="always")
def inertia_apply(m, h0, h1, h2, I, w0, w1, w2, l0, l1, l2):  # noqa: E741
    """(m, h, I_O) [w; l] = [I_O w + h x l; m l - h x w], on scalars (RBDL §7.3)."""
    return (I[0, 0] * w0 + I[0, 1] * w1 + I[0, 2] * w2 + h1 * l2 - h2 * l1,
            I[1, 0] * w0 + I[1, 1] * w1 + I[1, 2] * w2 + h2 * l0 - h0 * l2,
            I[2, 0] * w0 + I[2, 1] * w1 + I[2, 2] * w2 + h0 * l1 - h1 * l0,
            m * l0 - (h1 * w2 - h2 * w1),
            m * l1 - (h2 * w0 - h0 * w2),
            m * l2 - (h0 * w1 - h1 * w0))


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
def congruence_add(R, p, M, work, out):
    """out += X^T M X with X = ^iX_λ = [[R^T, 0], [-R^T p~, R^T]]: a 6x6 inertia moved
    from a child frame to its parent (RBDL eq. 13). In two steps, without forming X:
    rotate the blocks, M' = diag(R, R) M diag(R^T, R^T) = [[A, B], [B^T, C]], then
    shift by p: [[A - B p~ - (B p~)^T - p~ C p~, B + p~ C], [(B + p~ C)^T, C]].
    work: 6x6 scratch."""
    for bi, bj in ((0, 0), (0, 3), (3, 3)):  # blocks A, B, C of R M R^T
        for r in range(3):
            for c in range(3):
                acc = 0.0
                for k in range(3):
                    acc += R[r, k] * (M[bi + k, bj] * R[c, 0] + M[bi + k, bj + 1] * R[c, 1]
                                      + M[bi + k, bj + 2] * R[c, 2])
                work[bi + r, bj + c] = acc
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
        for r in range(3):
            out[3 + r, 3 + c] += work[3 + r, 3 + c]
    for c in range(3):  # p~ C p~, column c: p x (C p~)[:, c], where (C p~)[:, c] = C (p~ e_c) ...
        # (C p~)[k, c] for k = 0..2, from C's rows: row k of C times p~
        e0 = p2 * work[3, 4] - p1 * work[3, 5] if c == 0 else (p0 * work[3, 5] - p2 * work[3, 3] if c == 1
                                                               else p1 * work[3, 3] - p0 * work[3, 4])
        e1 = p2 * work[4, 4] - p1 * work[4, 5] if c == 0 else (p0 * work[4, 5] - p2 * work[4, 3] if c == 1
                                                               else p1 * work[4, 3] - p0 * work[4, 4])
        e2 = p2 * work[5, 4] - p1 * work[5, 5] if c == 0 else (p0 * work[5, 5] - p2 * work[5, 3] if c == 1
                                                               else p1 * work[5, 3] - p0 * work[5, 4])
        pcp0 = p1 * e2 - p2 * e1
        pcp1 = p2 * e0 - p0 * e2
        pcp2 = p0 * e1 - p1 * e0
        out[0, c] += work[0, c] - work[3, c] - work[3 + c, 0] - pcp0
        out[1, c] += work[1, c] - work[4, c] - work[3 + c, 1] - pcp1
        out[2, c] += work[2, c] - work[5, c] - work[3 + c, 2] - pcp2


@njit(cache=True, inline="always")
def motion_cross(a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5):
    """a x b on motion vectors, scalars: [a_w x b_w; a_w x b_v + a_v x b_w] (the Lie bracket [a, b])."""
    return (a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0,
            a1 * b5 - a2 * b4 + a4 * b2 - a5 * b1,
            a2 * b3 - a0 * b5 + a5 * b0 - a3 * b2,
            a0 * b4 - a1 * b3 + a3 * b1 - a4 * b0)


@njit(cache=True, inline="always")
def force_cross(a0, a1, a2, a3, a4, a5, f0, f1, f2, f3, f4, f5):
    """a x* f, a motion vector on a force vector, scalars: [a_w x n + a_v x f; a_w x f]."""
    return (a1 * f2 - a2 * f1 + a4 * f5 - a5 * f4,
            a2 * f0 - a0 * f2 + a5 * f3 - a3 * f5,
            a0 * f1 - a1 * f0 + a3 * f4 - a4 * f3,
            a1 * f5 - a2 * f4, a2 * f3 - a0 * f5, a0 * f4 - a1 * f3)


@njit(cache=True, inline="always")
def cross(a0, a1, a2, b0, b1, b2):
    """a x b, three scalars."""
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True, inline="always")
def rotate(R, i, x0, x1, x2):
    """R[i] x, three scalars."""
    return (R[i, 0, 0] * x0 + R[i, 0, 1] * x1 + R[i, 0, 2] * x2,
            R[i, 1, 0] * x0 + R[i, 1, 1] * x1 + R[i, 1, 2] * x2,
            R[i, 2, 0] * x0 + R[i, 2, 1] * x1 + R[i, 2, 2] * x2)


@njit(cache=True, inline="always")
def rotate_back(R, i, x0, x1, x2):
    """R[i]^T x, three scalars."""
    return (R[i, 0, 0] * x0 + R[i, 1, 0] * x1 + R[i, 2, 0] * x2,
            R[i, 0, 1] * x0 + R[i, 1, 1] * x1 + R[i, 2, 1] * x2,
            R[i, 0, 2] * x0 + R[i, 1, 2] * x1 + R[i, 2, 2] * x2)
