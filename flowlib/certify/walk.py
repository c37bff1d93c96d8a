"""The certifying walk: certified steps from event to event, each event proven and compared with the log.

Between events the configuration is fixed and :func:`~flowlib.certify.steps.certified_step` encloses the solution.
In each step every surface the state is not held on (``z_ij``) and every held multiplier's distance to its bounds
(``lam - leak``, ``1 - lam``) is searched for its first zero (:func:`~flowlib.certify.models.first_zero`); the
earliest, proven simple and separated from every other candidate, is the event. Its kind is then proven from the
signs of the one-sided normal velocities at the enclosed event state (docs/design.md, *Certified trajectories*):

* ``cross``: both one-sided normal velocities have the sign of the motion;
* ``slide_start``: the far side pushes back and every multiplier of the neuron's held surfaces is strictly inside
  ``(leak, 1)``;
* ``stick``: the far side's normal velocity is exactly zero (it is a structural zero, kept exact by ball
  arithmetic) and so is the multiplier's distance to its bound, for as long as it is held;
* ``slide_end``: a held multiplier reaches ``leak`` or 1 at a simple zero; the state leaves tangentially, to the
  side the sign of ``z''`` proves.

After every event the neuron's other held surfaces are checked (:func:`settle`): its slopes changed, so their
multipliers jumped; one that left the box is released at that instant. Surfaces of one neuron with exactly
parallel normals are one hyperplane, reached at one proven zero (:func:`classify_shared_crossing`).

Anything else (a tangency, two events that cannot be separated, a tie) ends the walk as *undecided* with the
reason; a proven disagreement with the log ends it as *rejected*.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowlib.certify.balls import decided_sign, flint, is_exact_zero
from flowlib.certify.field import BallNetwork, Configuration
from flowlib.certify.models import TaylorModel, Zero, first_zero, leading_sign
from flowlib.certify.steps import Step, certified_step, velocity


class Stop(Exception):
    """Ends the walk: ``status`` is ``"undecided"`` or ``"rejected"``."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class Found:
    """A proven event: ``kind``, the surface, the side entered (0 when held), its time and multiplier; for an event
    that starts holding a surface, the range ``(lo, hi)`` (exact mpf) of the multiplier while it is held, grown step
    by step (kept as endpoints: a wide ball's radius carries only about 30 bits)."""

    kind: str
    neuron: int
    sample: int
    side: int
    t: object
    multiplier: object = None
    multiplier_range: object = None


def initial_configuration(net: BallNetwork, state) -> Configuration:
    """The sides of the exact initial state; a state on a surface cannot be certified (yet)."""
    sides = []
    for i in range(net.n):
        row = []
        for j in range(len(state)):
            sign = decided_sign(net.preactivation(state[j], i))
            if not sign:
                raise Stop("undecided", f"neuron {j} starts on the surface of sample {i}: certify starts only off "
                                        "the surfaces")
            row.append(sign)
        sides.append(tuple(row))
    return Configuration(tuple(sides), {})


def _bounds(net: BallNetwork, value) -> tuple:
    """``(value - leak, 1 - value)``: both positive when ``value`` is strictly inside ``(leak, 1)``."""
    return value - net.leak, flint().arb(1) - value


def classify_arrival(net: BallNetwork, state, config: Configuration, i: int, j: int, t) -> tuple:
    """Prove what happens when neuron ``j`` reaches sample ``i``'s surface: returns the event and the configuration
    after it."""
    side = config.side[i][j]
    here, _ = net.normal_velocity(state, config, i, j)
    if decided_sign(here) != -side:
        raise Stop("undecided", f"neuron {j} reaches the surface of sample {i} at t = {t} tangentially (the normal "
                                f"velocity {here} has no proven sign)")
    there, _ = net.normal_velocity(state, config.with_side(i, j, -side), i, j)
    if decided_sign(there) == -side:
        return Found("cross", j, i, -side, t), config.with_side(i, j, -side)
    held = config.with_held(i, j)
    _, lam = velocity(net, state, held)
    if is_exact_zero(there):
        far_slope = net.slope(config.with_side(i, j, -side), i, j)
        if is_exact_zero(lam[(j, i)] - far_slope):
            return Found("stick", j, i, 0, t, lam[(j, i)]), held
    elif decided_sign(there) == side:
        if all(decided_sign(x) > 0 for key in lam if key[0] == j for x in _bounds(net, lam[key])):
            return Found("slide_start", j, i, 0, t, lam[(j, i)]), held
    raise Stop("undecided", f"neuron {j} reaches the surface of sample {i} at t = {t}, and the far side's normal "
                            f"velocity {there} does not prove a crossing, a slide with multipliers inside "
                            "(leak, 1), or an exact stick")


def settle(net: BallNetwork, state, config: Configuration, j: int, t) -> tuple:
    """After an event of neuron ``j``, prove that each of its held surfaces still holds it, or release it.

    An event changes one slope of the neuron, so its held multipliers jump. Each must be strictly inside
    ``(leak, 1)``, or exactly on a bound (a structural stick). One proven outside the box is released at the same
    instant (a ``slide_end``) to the one side whose field moves the neuron into it, and the others are checked
    again. Returns the configuration, the releases and the zeros they start with; anything else is undecided.
    """
    released, known = [], {}
    for _ in range(len(config.held.get(j, ())) + 1):
        if not config.held.get(j):
            break
        _, lam = velocity(net, state, config)
        outside = []
        for i in config.held[j]:
            low, high = _bounds(net, lam[(j, i)])
            if (decided_sign(low) > 0 and decided_sign(high) > 0) or is_exact_zero(low) or is_exact_zero(high):
                continue
            if decided_sign(low) < 0 or decided_sign(high) < 0:
                outside.append(i)
                continue
            raise Stop("undecided", f"at t = {t} the multiplier of neuron {j} on sample {i} touches a bound "
                                    f"({lam[(j, i)]}) after an event of the neuron")
        if not outside:
            break
        i = outside[0]
        sides = [side for side in (1, -1)
                 if decided_sign(net.normal_velocity(state, config.with_side(i, j, side), i, j)[0]) == side]
        if len(sides) != 1:
            raise Stop("undecided", f"at t = {t} neuron {j}'s multiplier on sample {i} leaves the box after an event "
                                    f"of the neuron, and {'both sides' if sides else 'no side'} can be proven to "
                                    "take it")
        config = config.with_side(i, j, sides[0])
        released.append(Found("slide_end", j, i, sides[0], t, net.leak if sides[0] < 0 else flint().arb(1)))
        known[("z", j, i)] = (1, sides[0])
    return config, released, known


def _is_pinned(step: Step, net: BallNetwork, j: int, i: int) -> bool:
    """A held multiplier that sits exactly on a bound for the whole step (every coefficient and the remainder exact
    and constant): a stick, proven to last over the step."""
    model = step.multiplier(j, i)
    bound_gap = [model.coeffs[0] - net.leak, model.coeffs[0] - 1]
    return (any(is_exact_zero(g) for g in bound_gap) and all(is_exact_zero(c) for c in model.coeffs[1:])
            and is_exact_zero(model.remainder))


def candidates(step: Step, net: BallNetwork, span_end, known: dict) -> list:
    """``(zero, key)`` for the first zero of every switching function in the step (``key`` is ``("z", j, i)`` or
    ``("lam", j, i, bound_side)``)."""
    arb = flint().arb
    found = []
    m = len(step.theta)
    for i in range(net.n):
        for j in range(m):
            if step.config.is_held(i, j):
                continue
            model = step.switching(net, i, j)
            if (i, j) in step.config.stuck:
                if not (all(is_exact_zero(c) for c in model.coeffs) and is_exact_zero(model.remainder)):
                    raise Stop("undecided", f"neuron {j}, stuck on the surface of sample {i}, is no longer held "
                                            "there by a structural zero")
                continue
            start = None
            if ("z", j, i) in known:
                mu, sign = known[("z", j, i)]
                lead = leading_sign(model, mu, span_end)
                if lead is None or lead[1] != sign:
                    raise Stop("undecided", f"cannot prove that neuron {j} leaves the surface of sample {i} to the "
                                            f"side {sign:+d}")
                start = lead[0]
            zero = first_zero(model, span_end, start)
            if zero is not None:
                found.append((zero, ("z", j, i)))
    for j, i in step.config.held_pairs():
        if _is_pinned(step, net, j, i):
            continue
        model = step.multiplier(j, i)
        for bound_side, shift in ((-1, net.leak), (1, arb(1))):
            coeffs = list(model.coeffs)
            coeffs[0] = coeffs[0] - shift
            zero = first_zero(TaylorModel(tuple(coeffs), model.remainder), span_end)
            if zero is not None:
                found.append((zero, ("lam", j, i, bound_side)))
    return found


def earliest(found: list, t, net: BallNetwork) -> tuple | None:
    """The proven earliest zero, separated from every other candidate; ``None`` when there is none.

    Candidates that cannot be separated from it are accepted only when they are the same hyperplane: surfaces of
    the same neuron whose normals are exactly parallel (duplicate samples, antipodal ones or any two in one
    dimension without a bias) have proportional switching functions, hence the same zero. The key is then
    ``("zs", j, samples)``.
    """
    if not found:
        return None
    found = sorted(found, key=lambda item: item[0].at.lower())
    zero, key = found[0]
    if not zero.proven:
        raise Stop("undecided", f"cannot decide whether {_describe(key)} is reached near t = {t + zero.at}")
    together = [key]
    for other, other_key in found[1:]:
        if other.at.lower() > zero.at.upper():
            continue
        if key[0] == other_key[0] == "z" and key[1] == other_key[1] and net.parallel(key[2], other_key[2]):
            together.append(other_key)
            continue
        raise Stop("undecided", f"{_describe(key)} and {_describe(other_key)} are reached at times that "
                                f"cannot be separated (near t = {t + zero.at})")
    if len(together) > 1:
        return zero, ("zs", key[1], tuple(k[2] for k in together))
    return zero, key


def _describe(key) -> str:
    if key[0] == "zs":
        return f"the hyperplane of neuron {key[1]} shared by samples {list(key[2])}"
    if key[0] == "z":
        return f"the surface of neuron {key[1]} and sample {key[2]}"
    return f"the bound {'1' if key[3] > 0 else 'leak'} of neuron {key[1]}'s multiplier on sample {key[2]}"


def apply_event(net: BallNetwork, step: Step, zero: Zero, key, t, now) -> tuple:
    """The proven events at ``zero`` (a list: several when one hyperplane holds several samples' surfaces), the
    uncertain state after them, the configuration and the zeros known at the start of the next step."""
    after = step.advance(zero.at, now)
    try:
        return _classify(net, step, after, key, t + zero.at)
    except (ValueError, ZeroDivisionError):  # a multiplier system singular somewhere in the event's enclosure
        raise Stop("undecided", f"{_describe(key)} is reached at t = {t + zero.at}, where a held multiplier's "
                                "system cannot be solved over the state's enclosure") from None


def _classify(net: BallNetwork, step: Step, after, key, when) -> tuple:
    """The stages of :func:`apply_event` after the event state is known."""
    state = after.box(step.moving)
    if key[0] == "z":
        _, j, i = key
        found, config = classify_arrival(net, state, step.config, i, j, when)
        events, known = [found], ({("z", j, i): (1, found.side)} if found.kind == "cross" else {})
    elif key[0] == "zs":
        j = key[1]
        events, config = classify_shared_crossing(net, state, step.config, key[2], j, when)
        known = {("z", e.neuron, e.sample): (1, e.side) for e in events}
    else:
        _, j, i, side = key
        config = step.config.with_side(i, j, side)
        lam = net.leak if side < 0 else flint().arb(1)
        events, known = [Found("slide_end", j, i, side, when, lam)], {("z", j, i): (2, side)}
    config, released, more = settle(net, state, config, j, when)
    return events + released, after, config, {**known, **more}


def classify_shared_crossing(net: BallNetwork, state, config: Configuration, samples: tuple, j: int, t) -> tuple:
    """Neuron ``j`` reaches one hyperplane that is the surface of several samples (parallel normals): it crosses
    when the field with every one of them on its far side still moves it through (the normal velocity along the
    first sample's normal keeps its sign); anything else is undecided (sliding there has no unique multipliers)."""
    lead = samples[0]
    side = config.side[lead][j]
    here, _ = net.normal_velocity(state, config, lead, j)
    flipped = config
    for i in samples:
        flipped = flipped.with_side(i, j, -config.side[i][j])
    there, _ = net.normal_velocity(state, flipped, lead, j)
    if decided_sign(here) == -side and decided_sign(there) == -side:
        return [Found("cross", j, i, -config.side[i][j], t) for i in samples], flipped
    if decided_sign(here) == -side and is_exact_zero(there):
        # the far side has no normal component, structurally: the neuron stays on the hyperplane with the far
        # side's slopes (the minimal-norm choice), for as long as that zero stays exact
        stuck = flipped.with_stuck((i, j) for i in samples)
        return [Found("stick", j, i, 0, t, net.slope(flipped, i, j)) for i in samples], stuck
    raise Stop("undecided", f"neuron {j} reaches the hyperplane shared by samples {list(samples)} at t = {t} and "
                            "neither provably crosses it nor sticks there structurally (a slide on dependent normals "
                            "cannot be certified yet)")


def match(found: list, expected: list, index: int, time_tol: float, provable: tuple) -> None:
    """Compare the proven events (one, or several at one instant) with the log's events from ``index`` (events at
    one instant in any order); a mismatch rejects the log."""
    for k, e in enumerate(expected[index:index + len(found)]):
        if e.kind not in provable:
            raise Stop("undecided", f"the log's next event is a {e.kind} (neuron {e.neuron}, sample {e.sample}, "
                                    f"t = {e.t!r}), a kind certify cannot prove")
    first = found[0]
    if index + len(found) > len(expected):
        raise Stop("rejected", f"the flow has a {first.kind} of neuron {first.neuron} on sample {first.sample} at "
                               f"t = {first.t}, which the log does not have (it ends earlier)")
    logged = expected[index:index + len(found)]
    mine = sorted((f.kind, f.neuron, f.sample) for f in found)
    if sorted((e.kind, e.neuron, e.sample) for e in logged) != mine:
        e = logged[0]
        raise Stop("rejected", f"the flow's next event is a {first.kind} of neuron {first.neuron} on sample "
                               f"{first.sample} at t = {first.t}; the log has a {e.kind} of neuron {e.neuron} on "
                               f"sample {e.sample} at t = {e.t!r}")
    sides = {(f.neuron, f.sample): f.side for f in found}
    for e in logged:
        if e.side != sides[(e.neuron, e.sample)]:
            raise Stop("rejected", f"the {e.kind} of neuron {e.neuron} on sample {e.sample} enters side "
                                   f"{sides[(e.neuron, e.sample)]}, the log says {e.side}")
        gap = abs(first.t - e.t)
        if not gap.lower() <= time_tol * max(1.0, abs(e.t)):
            raise Stop("rejected", f"the log's {e.kind} of neuron {e.neuron} on sample {e.sample} at t = {e.t!r} "
                                   f"lies outside the proven enclosure {first.t} by more than time_tol = "
                                   f"{time_tol:g} (relative)")


def next_step(net: BallNetwork, now, config, order: int, prec: int, h_max: float) -> Step:
    step = certified_step(net, now, config, order, prec, h_max)
    if step is None:
        raise Stop("undecided", "no step could be certified (the a priori enclosure or the remainder failed at "
                                "every step length tried)")
    return step

