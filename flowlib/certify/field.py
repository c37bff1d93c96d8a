"""The network's gradient field under a fixed configuration, in ball arithmetic, and its Taylor series.

A *configuration* says, for every pair (neuron ``j``, sample ``i``), which slope the field uses: the side of the
surface ``z_ij = <w_j, x_i> + b_j = 0`` the neuron is on (slope 1 on the active side, ``leak`` on the other), or
*held* (the neuron stays on the surface and the slope is the Filippov multiplier that makes the normal velocity
zero). Under a configuration the field is analytic, and the Taylor coefficients of its solution follow from
Picard's iteration on truncated power series: each pass makes one more coefficient exact, since the field's
coefficient ``k`` only depends on the state's coefficients up to ``k``.

The multipliers of a neuron held on the surfaces ``H`` solve the linear system that makes every normal velocity in
``H`` vanish (docs/design.md, *Several surfaces at once*). It is solved everywhere, not only on the surfaces, so
that ``z_ij' = -decay z_ij`` for every held pair: a trajectory that starts on its surfaces stays there exactly,
which is the sliding solution of the inclusion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowlib.certify.balls import exact, flint, is_exact_zero, series_length
from flowlib.problem import Problem

LOSS_EXP, LOSS_LOGISTIC, LOSS_SQUARE = "exp", "logistic", "square"


@dataclass(frozen=True)
class Configuration:
    """Which slope every (neuron, sample) pair uses.

    Attributes
    ----------
    side : tuple of tuple of int
        ``side[i][j]``: +1 (active, slope 1) or -1 (inactive, slope ``leak``); ignored for held pairs.
    held : dict
        ``held[j]``: the samples whose surfaces neuron ``j`` stays on (a tuple, possibly empty).
    stuck : frozenset
        Pairs ``(i, j)`` that sit on their surface with the slope of their ``side`` because that side's field has
        no normal component there, structurally (an exact zero): a stick on a hyperplane that several samples
        share, where no multipliers can be solved for.
    """

    side: tuple
    held: dict = field(default_factory=dict)
    stuck: frozenset = frozenset()

    def is_held(self, i: int, j: int) -> bool:
        return i in self.held.get(j, ())

    def with_side(self, i: int, j: int, side: int) -> "Configuration":
        """The configuration with pair ``(j, i)`` released (if held) to ``side``."""
        rows = [list(row) for row in self.side]
        rows[i][j] = side
        held = dict(self.held)
        if i in held.get(j, ()):
            held[j] = tuple(k for k in held[j] if k != i)
        return Configuration(tuple(tuple(row) for row in rows), held, self.stuck - {(i, j)})

    def with_stuck(self, pairs) -> "Configuration":
        """The configuration with ``pairs`` (``(i, j)``) stuck on their current sides."""
        return Configuration(self.side, self.held, self.stuck | frozenset(pairs))

    def with_held(self, i: int, j: int) -> "Configuration":
        """The configuration with pair ``(j, i)`` held."""
        held = dict(self.held)
        held[j] = tuple(held.get(j, ())) + (i,)
        return Configuration(self.side, held, self.stuck)

    def held_pairs(self) -> list:
        """``(j, i)`` for every held pair, in a fixed order."""
        return [(j, i) for j in sorted(self.held) for i in self.held[j]]


class BallNetwork:
    """A :class:`~flowlib.Problem` in ball arithmetic: exact data, and the field's Taylor series.

    Every number of the problem is a float64 and becomes an exact ball; ``1/n`` of a mean is enclosed at the working
    precision. Build and use it inside :func:`flowlib.certify.balls.working`.
    """

    def __init__(self, problem: Problem):
        arb = flint().arb
        Xa = problem.augmented_inputs
        self.n, self.d = problem.n, problem.d
        self.x = [[exact(v) for v in row[:self.d]] for row in Xa]
        one, zero = arb(1), arb(0)
        self.normal = [row + [one if problem.bias else zero] for row in self.x]
        self.gram = [[sum((u * v for u, v in zip(p, q)), zero) for q in self.normal] for p in self.normal]
        self.y = [exact(v) for v in problem.y]
        self.c = one / self.n if problem.reduction == "mean" else one
        self.leak = exact(problem.leak)
        self.loss = problem.loss
        self.bias = problem.bias
        self.train_outer = problem.train_outer
        self.decay = exact(problem.weight_decay)
        self.has_decay = problem.weight_decay != 0
        self.minus_y = [-v for v in self.y]
        self.minus_cy = [-self.c * v for v in self.y]
        self.support = [[q for q in range(self.d) if not self.x[i][q].is_zero()] for i in range(self.n)]
        self._plan = None

    # -- pieces of the field -----------------------------------------------------------------------------------

    def slope(self, config: Configuration, i: int, j: int):
        """The slope of a pair that is not held."""
        return flint().arb(1) if config.side[i][j] > 0 else self.leak

    def preactivation(self, row, i: int):
        """``z_ij = <w_j, x_i> + b_j`` for the parameters ``row = (w_j, b_j, a_j)`` (numbers or series)."""
        total = row[self.d] if self.bias else None
        for q in range(self.d):
            term = row[q] * self.x[i][q]
            total = term if total is None else total + term
        return total

    def loss_derivative(self, f, i: int):
        """``G_i = c l'(f_i)``."""
        y = self.y[i]
        if self.loss == LOSS_SQUARE:
            return (f - y) * self.c
        if self.loss == LOSS_EXP:
            return (f * self.minus_y[i]).exp() * self.minus_cy[i]
        return self.minus_cy[i] / ((f * y).exp() + 1)

    def plan(self, config: Configuration, m: int) -> "_Plan":
        """The pairs that enter the field under ``config`` (the last plan is kept: a walk asks for one
        configuration many times in a row)."""
        if self._plan is None or self._plan[0] is not config or self._plan[1] != m:
            self._plan = (config, m, _Plan.of(self, config, m))
        return self._plan[2]

    def multipliers(self, P, G, config: Configuration, j: int, plan: "_Plan") -> list:
        """Slopes of neuron ``j``'s held surfaces that make ``sum_k G_k s_kj <n_k, n_i>`` vanish for each held
        ``i`` (Gaussian elimination with partial pivoting on the constant terms; one row per held surface).

        The normal velocity is ``-a_j`` times that sum, minus ``decay z_ij``: the factor ``a_j`` is cancelled (a
        held neuron's outer weight may pass through 0), and ``z_ij' = -decay z_ij`` keeps ``z_ij = 0`` exactly."""
        H = config.held[j]
        rhs = []
        for r in H:
            total = None
            for k, s in plan.sides[j]:
                if self.gram[k][r].is_zero():
                    continue
                term = G[k] * (s * self.gram[k][r])
                total = term if total is None else total + term
            rhs.append(0 * G[0] if total is None else total)
        M = [[G[c] * (-self.gram[c][r]) for c in H] for r in H]
        return _solve(M, rhs)

    def residuals(self, P, config: Configuration):
        """The switching functions ``Z[(i, j)]`` of the pairs that enter the field, the residual weights ``G[i]``
        and the held multipliers ``lam[(j, i)]`` of parameters ``P[j] = (w_j, b_j, a_j)`` (numbers or series)."""
        d, m = self.d, len(P)
        plan = self.plan(config, m)
        Z = {pair: self.preactivation(P[pair[1]], pair[0]) for pair in plan.needed}
        G = []
        for i, terms in enumerate(plan.output):
            f = None
            for j, s in terms:
                term = P[j][d + 1] * Z[(i, j)] if s is None else P[j][d + 1] * Z[(i, j)] * s
                f = term if f is None else f + term
            G.append(self.loss_derivative(0 * P[0][0] if f is None else f, i))
        lam = {}
        for j in plan.held_neurons:
            lam.update(zip(((j, i) for i in config.held[j]), self.multipliers(P, G, config, j, plan)))
        return Z, G, lam

    def normal_velocity(self, P, config: Configuration, i: int, j: int):
        """``d z_ij / dt = -a_j sum_k G_k s_kj <n_k, n_i> - decay z_ij``, summed over the exact Gram matrix so that
        a structural zero (orthogonal normals, zero slopes) stays an exact zero."""
        Z, G, lam = self.residuals(P, config)
        total = self.preactivation(P[j], i) * (-self.decay)
        for k in range(self.n):
            s = lam[(j, k)] if (j, k) in lam else self.slope(config, k, j)
            if self.gram[k][i].is_zero() or (s.is_zero() and s.is_exact()):
                continue
            total = total - P[j][self.d + 1] * G[k] * s * self.gram[k][i]
        return total, lam

    def field(self, P, config: Configuration):
        """The velocity of every parameter and the held multipliers, for parameters ``P[j] = (w_j, b_j, a_j)``.

        Returns
        -------
        V : list
            ``V[j][q]``: the velocity of parameter ``q`` of neuron ``j`` (``None`` for a parameter that does not
            move).
        lam : dict
            ``lam[(j, i)]``: the multiplier of every held pair.
        """
        d, m = self.d, len(P)
        plan = self.plan(config, m)
        Z, G, lam = self.residuals(P, config)
        V = []
        for j in range(m):
            w_dot = [None] * d
            b_dot = a_dot = None
            for i, s in plan.velocity[j]:
                q = G[i] * lam[(j, i)] if s == "held" else (G[i] if s is None else G[i] * s)
                for k in self.support[i]:
                    term = q * self.x[i][k]
                    w_dot[k] = term if w_dot[k] is None else w_dot[k] + term
                if self.bias:
                    b_dot = q if b_dot is None else b_dot + q
                if self.train_outer:
                    term = G[i] * Z[(i, j)] if s is None or s == "held" else G[i] * Z[(i, j)] * s
                    a_dot = term if a_dot is None else a_dot + term
            a = P[j][d + 1]
            zero = 0 * P[j][0]
            row = [-(a * (zero if v is None else v)) for v in w_dot]
            row.append(-(a * (zero if b_dot is None else b_dot)) if self.bias else None)
            row.append(-(zero if a_dot is None else a_dot) if self.train_outer else None)
            if self.has_decay:
                row = [None if v is None else v - P[j][k] * self.decay for k, v in enumerate(row)]
            V.append(row)
        return V, lam

    # -- Taylor series -----------------------------------------------------------------------------------------

    def taylor(self, state, config: Configuration, order: int):
        """Taylor coefficients of the configuration's solution through ``state`` (balls, ``state[j][q]``).

        Runs ``order`` passes of Picard's iteration: the state's coefficients ``0..order`` and the multipliers'
        ``0..order - 1`` come out exact (as balls containing the exact coefficients of every solution through a
        member of ``state``).

        Returns
        -------
        theta : list
            ``theta[j][q]``: list of ``order + 1`` coefficients.
        lam : dict
            ``lam[(j, i)]``: list of ``order`` coefficients of each held multiplier.
        """
        arb, arb_series = flint().arb, flint().arb_series
        m = len(state)
        moving = self.moving(m)
        theta = [[[state[j][q]] for q in range(self.d + 2)] for j in range(m)]
        lam = {}
        for length in range(1, order + 1):
            with series_length(length):
                P = [[arb_series(theta[j][q], prec=length) for q in range(self.d + 2)] for j in range(m)]
                V, lam_series = self.field(P, config)
            for j, q in moving:
                theta[j][q].append(coefficient(V[j][q], length - 1) / length)
            lam = {key: [coefficient(value, k) for k in range(length)] for key, value in lam_series.items()}
        for j in range(m):
            for q in range(self.d + 2):
                theta[j][q] += [arb(0)] * (order + 1 - len(theta[j][q]))
        return theta, lam

    def parallel(self, i: int, k: int) -> bool:
        """The normals of samples ``i`` and ``k`` are exactly parallel (every 2 x 2 minor an exact zero): their
        surfaces are one hyperplane for every neuron. The data are float64, so the minors are exact at the working
        precision."""
        u, v = self.normal[i], self.normal[k]
        return all(is_exact_zero(u[p] * v[q] - u[q] * v[p]) for p in range(len(u)) for q in range(p + 1, len(u)))

    def moving(self, m: int) -> list:
        """``(j, q)`` of every parameter the flow moves (``b`` only with a bias, ``a`` only when trained)."""
        return [(j, q) for j in range(m) for q in range(self.d + 2)
                if q < self.d or (q == self.d and self.bias) or (q == self.d + 1 and self.train_outer)]

    def jacobian(self, box, config: Configuration) -> list:
        """``J[r][c]``: the derivative of the velocity of moving parameter ``r`` along moving parameter ``c``,
        enclosed over the box of states ``box`` (forward differentiation: series of length 2 in a direction)."""
        arb, arb_series = flint().arb, flint().arb_series
        moving = self.moving(len(box))
        columns = []
        with series_length(2):
            for direction in moving:
                P = [[arb_series([box[j][q], arb(1) if (j, q) == direction else arb(0)], prec=2)
                      for q in range(self.d + 2)] for j in range(len(box))]
                V, _ = self.field(P, config)
                columns.append([coefficient(V[j][q], 1) for j, q in moving])
        return [[columns[c][r] for c in range(len(moving))] for r in range(len(moving))]

    def switching_coefficients(self, theta, i: int, j: int) -> list:
        """Coefficients of ``z_ij`` from the state's (``z`` is linear in the state)."""
        return [self.preactivation([c[k] for c in theta[j]], i) for k in range(len(theta[j][0]))]


@dataclass(frozen=True)
class _Plan:
    """The pairs of one configuration that enter the field, with their slopes (``None`` for slope 1, ``"held"`` for
    a multiplier): pairs with slope 0 (the inactive side of a ReLU) drop out of everything."""

    output: tuple          # output[i]: (j, s) of the terms of f_i (held pairs with slope 1: z = 0 on the surface)
    velocity: tuple        # velocity[j]: (i, s) of the samples that move neuron j
    sides: tuple           # sides[j]: (i, s) of neuron j's samples that are not held and not of slope 0 (s a ball)
    needed: tuple          # the pairs (i, j) whose z enters
    held_neurons: tuple

    @classmethod
    def of(cls, net: "BallNetwork", config: Configuration, m: int) -> "_Plan":
        one = flint().arb(1)
        output, velocity, sides, needed = [[] for _ in range(net.n)], [[] for _ in range(m)], [[] for _ in range(m)], []
        for i in range(net.n):
            for j in range(m):
                if config.is_held(i, j):
                    output[i].append((j, None))
                    velocity[j].append((i, "held"))
                    needed.append((i, j))
                    continue
                s = net.slope(config, i, j)
                if s.is_zero():
                    continue
                slope = None if s == one else s
                output[i].append((j, slope))
                velocity[j].append((i, slope))
                sides[j].append((i, s))
                needed.append((i, j))
        for j in config.held:
            needed += [(i, j) for i in config.held[j] if (i, j) not in needed]
        return cls(tuple(map(tuple, output)), tuple(map(tuple, velocity)), tuple(map(tuple, sides)), tuple(needed),
                   tuple(j for j in sorted(config.held) if config.held[j]))


def coefficient(series, k: int):
    """Coefficient ``k`` of a power series (0 beyond its stored terms); a number is its own constant term."""
    if not hasattr(series, "coeffs"):
        return series if k == 0 else flint().arb(0)
    coeffs = series.coeffs()
    return coeffs[k] if k < len(coeffs) else flint().arb(0)


def _solve(M, rhs) -> list:
    """Solve ``M x = rhs`` over power series (Gaussian elimination, pivoting on the constant terms)."""
    k = len(rhs)
    M = [list(row) for row in M]
    rhs = list(rhs)
    for col in range(k):
        pivot = max(range(col, k), key=lambda r: abs(coefficient(M[r][col], 0).mid()))
        M[col], M[pivot] = M[pivot], M[col]
        rhs[col], rhs[pivot] = rhs[pivot], rhs[col]
        for r in range(col + 1, k):
            factor = M[r][col] / M[col][col]
            M[r] = [M[r][c] - factor * M[col][c] for c in range(k)]
            rhs[r] = rhs[r] - factor * rhs[col]
    x = [None] * k
    for r in reversed(range(k)):
        total = rhs[r]
        for c in range(r + 1, k):
            total = total - M[r][c] * x[c]
        x[r] = total / M[r][r]
    return x
