"""One certified step: an a priori enclosure, the Taylor polynomial and its rigorous remainder.

For a configuration's analytic field ``F`` and a ball of states ``Theta``:

1. *A priori enclosure.* A box ``B`` with ``Theta + [0, h] F(B) ⊆ B`` contains every solution from ``Theta`` over
   ``[0, h]`` (Picard–Lindelöf); it is found by iterating that map from a first-order guess.
2. *Polynomial.* The Taylor coefficients ``0..K`` of the solution through ``Theta`` (:meth:`BallNetwork.taylor`).
3. *Remainder.* The coefficient ``K + 1`` of the expansion through every point of ``B`` encloses
   ``theta^(K+1)(xi) / (K+1)!`` for every ``xi`` in the step, so ``theta(s)`` lies in the polynomial plus that ball
   times ``s^(K+1)``. The same holds for the held multipliers, which are analytic functions of the state.

The step length is first guessed from the decay of the coefficients so that the remainder is near the working
precision, then halved until the enclosure exists and the remainder is small enough.

The true state is known as an :class:`Uncertain` point: an exact centre and a Euclidean radius. A step's
predicates (events, classification) use the Taylor model from the box around it, which holds every member; the
next step's centre and radius come from the model through the centre alone, widened by ``e^(mu s)`` with ``mu``
the proven logarithmic norm over ``B`` (:mod:`flowlib.certify.contraction`), so uncertainty is carried at the
rate the flow actually separates solutions.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowlib.certify.balls import flint, magnitude, span, upper
from flowlib.certify.contraction import log_norm_bound
from flowlib.certify.field import BallNetwork, Configuration, coefficient
from flowlib.certify.models import TaylorModel

#: attempts at an enclosure before a step is halved
ENCLOSURE_PASSES = 8
#: halvings of a step before giving up
MAX_HALVINGS = 40
#: the remainder may exceed the working epsilon (relative to the state's size) by this factor
REMAINDER_SLACK = 2.0**12


@dataclass(frozen=True)
class Uncertain:
    """What is known of the true state: it lies in the box ``cell`` (``cell[j][q]``, balls) and within Euclidean
    distance ``radius`` of the exact point ``center``. The box keeps each parameter's own scale (small neurons stay
    known to their own relative precision); the ball follows the flow's actual rate of separation (no wrapping);
    each bounds the other."""

    center: list
    radius: float
    cell: list

    def box(self, moving: list) -> list:
        """A box of balls containing the true state: the cell, narrowed by the ball on each moved parameter."""
        arb = flint().arb
        rows = [list(row) for row in self.cell]
        if self.radius < float("inf"):
            for j, q in moving:
                near = self.center[j][q] + arb(0, self.radius) if self.radius > 0 else self.center[j][q]
                rows[j][q] = _meet(rows[j][q], near)
        return rows


def _meet(a, b):
    """The intersection of two balls that both contain the true value (``a`` should they not overlap, which would be
    a defect: it is never narrower than what is proven)."""
    return a.intersection(b) if a.overlaps(b) else a


@dataclass(frozen=True)
class Step:
    """A certified step of one configuration over ``[0, h]`` from the states ``start``.

    Attributes
    ----------
    theta : list
        ``theta[j][q]``: Taylor coefficients ``0..K`` of each parameter.
    rest : list
        ``rest[j][q]``: the remainder coefficient (``K + 1``) of each parameter over the step.
    lam, lam_rest : dict
        The same for each held multiplier, keyed ``(j, i)``.
    box : list
        ``box[j][q]``: the a priori enclosure of each parameter over the step.
    center : list
        ``center[j][q]``: Taylor coefficients ``0..K`` of the solution through the exact centre.
    mu : float
        A proven logarithmic norm of the field over ``box``.
    moving : list
        ``(j, q)`` of the parameters the flow moves.
    """

    config: Configuration
    h: object
    theta: list
    rest: list
    lam: dict
    lam_rest: dict
    box: list
    center: list
    mu: float
    moving: list

    def parameter(self, j: int, q: int) -> TaylorModel:
        return TaylorModel(tuple(self.theta[j][q]), self.rest[j][q])

    def state_at(self, s) -> list:
        """An enclosure of the state at step time ``s`` (a ball inside ``[0, h]``)."""
        return [[self.parameter(j, q).value(s) for q in range(len(row))] for j, row in enumerate(self.theta)]

    def advance(self, s, now: Uncertain) -> Uncertain:
        """What is known at step time ``s`` from what was known at its start (``now``): the box model's value, and
        the centre's model there, re-centred, with the radius widened by ``e^(mu s)`` and by the distance from the
        new centre to the centre model's enclosure."""
        arb = flint().arb
        values = [[TaylorModel(tuple(self.center[j][q]), self.rest[j][q]).value(s) for q in range(len(row))]
                  for j, row in enumerate(self.center)]
        center = [[x.mid() for x in row] for row in values]  # exact
        spread = sum((values[j][q].rad() ** 2 for j, q in self.moving), arb(0)).sqrt()  # |value - mid| <= rad
        growth = (arb(self.mu) * s).exp() * arb(now.radius)
        return Uncertain(center, upper(spread + growth), self.state_at(s))

    def enclosure_at(self, s, now: Uncertain) -> list:
        """An enclosure of the state at step time ``s``."""
        return self.advance(s, now).box(self.moving)

    def switching(self, net: BallNetwork, i: int, j: int) -> TaylorModel:
        """The model of ``z_ij`` (linear in the state: its remainder follows from the parameters')."""
        coeffs = net.switching_coefficients(self.theta, i, j)
        return TaylorModel(tuple(coeffs), net.preactivation(self.rest[j], i))

    def multiplier(self, j: int, i: int) -> TaylorModel:
        return TaylorModel(tuple(self.lam[(j, i)]), self.lam_rest[(j, i)])


def velocity(net: BallNetwork, state, config: Configuration):
    """The field at a ball of states (``None`` for parameters that do not move) and the held multipliers."""
    arb_series = flint().arb_series
    P = [[arb_series([value], prec=1) for value in row] for row in state]
    V, lam = net.field(P, config)
    return ([[None if v is None else coefficient(v, 0) for v in row] for row in V],
            {key: coefficient(value, 0) for key, value in lam.items()})


def _inflate(x, extra):
    return x + flint().arb(0, 1) * (x.rad() + extra)


def enclosure(net: BallNetwork, start, config: Configuration, h):
    """A box containing every solution from ``start`` over ``[0, h]``, or ``None`` when the iteration fails."""
    arb = flint().arb
    interval = span(arb(0), h)
    V, _ = velocity(net, start, config)
    guess = [[x if v is None else x + interval * v for x, v in zip(row, vrow)] for row, vrow in zip(start, V)]
    for _ in range(ENCLOSURE_PASSES):
        tiny = [[arb(2.0 ** -40) * (abs(x).upper() + 1) * h for x in row] for row in guess]
        box = [[_inflate(x, x.rad() + e) for x, e in zip(row, erow)] for row, erow in zip(guess, tiny)]
        try:
            V, _ = velocity(net, box, config)
        except (ZeroDivisionError, ValueError):  # a multiplier's system is singular somewhere in the box
            return None
        image = [[x if v is None else x + interval * v for x, v in zip(row, vrow)] for row, vrow in zip(start, V)]
        if all(b.contains(y) for brow, yrow in zip(box, image) for b, y in zip(brow, yrow)):
            return image
        guess = image
    return None


def _guess(theta, order: int, scale: float, eps: float) -> float:
    """A step whose last Taylor terms are near ``eps * scale``: ``min_k (eps scale / |c_k|)^(1/k)`` over the two
    last orders."""
    best = float("inf")
    for k in (order - 1, order):
        size = max(magnitude(row[q][k]) for row in theta for q in range(len(row)))
        if size > 0:
            best = min(best, (eps * scale / size) ** (1.0 / k))
    return best


def certified_step(net: BallNetwork, now: Uncertain, config: Configuration, order: int, prec: int,
                   h_max: float) -> Step | None:
    """A :class:`Step` from the uncertain state ``now`` no longer than ``h_max``, or ``None`` when none could be
    certified."""
    arb = flint().arb
    eps = 2.0 ** -prec
    moving = net.moving(len(now.center))
    start = now.box(moving)
    theta, lam = net.taylor(start, config, order + 1)
    center, _ = net.taylor(now.center, config, order + 1) if now.radius > 0 else (theta, lam)
    scale = 1.0 + max(magnitude(x) for row in start for x in row)
    h = 0.5 * _guess(theta, order, scale, eps)
    h = h_max if h >= 0.5 * h_max else h  # never leave a sliver: the end of the span is a ball
    # the enclosure must hold the centre's solution too (its model shares the remainder, and the log-norm bound
    # needs both solutions in one convex box); the centre need not lie in the narrowed box
    both = [[x.union(c) for x, c in zip(row, crow)] for row, crow in zip(start, now.center)]
    for _ in range(MAX_HALVINGS):
        h_ball = arb(h)
        box = enclosure(net, both, config, h_ball)
        if box is not None:
            try:
                over, lam_over = net.taylor(box, config, order + 2)
                mu = log_norm_bound(net.jacobian(box, config))
            except (ZeroDivisionError, ValueError):  # a multiplier's system is singular somewhere in the box
                over = None
            if over is not None and mu < float("inf"):
                rest = [[row[q][order + 1] for q in range(len(row))] for row in over]
                worst = max(magnitude(r) for row in rest for r in row) * h ** (order + 1)
                if worst <= REMAINDER_SLACK * eps * scale:
                    cut = lambda rows: [[row[q][:order + 1] for q in range(len(row))] for row in rows]  # noqa: E731
                    return Step(config, h_ball, cut(theta), rest, {k: v[:order + 1] for k, v in lam.items()},
                                {k: v[order + 1] for k, v in lam_over.items()}, box, cut(center), mu, moving)
        h *= 0.5
    return None
