"""Certified variants of claims: :func:`flowlib.certify` on a claim's instance, and what it proved in a few words.

Each function returns ``(text, ok, data)``: the report's "certified" cell, whether the certificate holds and agrees
with the independent reference (closed form or exact limit), and numbers for ``report.json``. Without python-flint
(the ``certify`` extra) the text says so and ``ok`` is True: the claim itself is measured on the flow as before.
"""

from __future__ import annotations

import importlib.util

from mpmath import mp

import flowlib as fl
from flowlib.certify.certificate import format_interval

#: working precision of the certificates (bits)
PREC = 128
MISSING = "not run: needs python-flint (pip install 'flowlib[certify]')"


def available() -> bool:
    """Whether python-flint is installed."""
    return importlib.util.find_spec("flint") is not None


def _relative(bounds, scale) -> float:
    with mp.workdps(60):
        return float((bounds[1] - bounds[0]) / abs(scale))


def kink_times(res, closed_form: dict, final_state=None) -> tuple:
    """Seed 000's two-kink flow: every stick's time enclosure holds the closed-form kink time (``closed_form``:
    ``{(neuron, sample): mpf}``) and is narrower than 1e-12 relative; with ``final_state`` (nested lists of mpf,
    packed), the state's enclosure at the result's final time holds it too, each entry to 1e-12 relative."""
    if not available():
        return MISSING, True, {}
    cert = fl.certify(res, prec=PREC)
    found = {(e.neuron, e.sample): e for e in cert.events}
    with mp.workdps(60):
        ok = (cert.certified and set(found) == set(closed_form)
              and all(found[k].t[0] <= closed_form[k] <= found[k].t[1]
                      and _relative(found[k].t, closed_form[k]) <= 1e-12 for k in closed_form))
        if final_state is not None and cert.certified:
            lo, hi = cert.states[-1]
            ok = ok and all(lo[j, q] <= value <= hi[j, q] and _relative((lo[j, q], hi[j, q]), max(1, abs(value)))
                            <= 1e-12 for j, row in enumerate(final_state) for q, value in enumerate(row))
    parts = [f"{e.kind} of neuron {e.neuron} at t = {format_interval(e.t, 20)}" for e in cert.events]
    held = "the closed-form kink times" + ("" if final_state is None else " and final state")
    text = (f"{cert.status} to t = {float(cert.t_certified[0]):g} in {cert.wall_s:.1f} s: " + "; ".join(parts)
            + (f"; the enclosures hold {held}" if ok else f" ({held} NOT enclosed) {cert.reason}"))
    return text, ok, {"status": cert.status, "seconds": cert.wall_s,
                      "kinks": {f"{k}": [str(found[k].t[0]), str(found[k].t[1])] for k in found}}


def loss_limit(res, t: float, limit, bound: float) -> tuple:
    """A plateau: the loss at ``t`` is enclosed and the enclosure lies within ``bound`` of ``limit`` (mpf)."""
    if not available():
        return MISSING, True, {}
    cert = fl.certify(res, times=[t], prec=PREC)
    if not cert.certified:
        return f"{cert.status} at t = {float(cert.t_certified[0]):g}: {cert.reason}", False, {"status": cert.status}
    with mp.workdps(60):
        lo, hi = cert.losses[0]
        gap = (lo - limit, hi - limit)
        ok = max(abs(gap[0]), abs(gap[1])) <= bound
        text = (f"certified to t = {t:g} in {cert.wall_s:.0f} s: L(t) - L* = {format_interval(gap, 6)} (L* the exact limit "
                f"for the float64 data), {'within' if ok else 'NOT within'} {bound:g}")
        return text, ok, {"status": cert.status, "seconds": cert.wall_s, "gap": [float(g) for g in gap]}


def hit_time(res, closed_form: float, tolerance: float) -> tuple:
    """A sliding entry: its time enclosure lies within ``tolerance`` of the (small-initialisation) closed form."""
    if not available():
        return MISSING, True, {}
    cert = fl.certify(res, prec=PREC)
    if not cert.certified or not cert.events:
        return f"{cert.status}: {cert.reason}", False, {"status": cert.status}
    e = cert.events[0]
    with mp.workdps(60):
        off = max(abs(e.t[0] - closed_form), abs(e.t[1] - closed_form))
        ok = e.kind == "slide_start" and off <= tolerance
        text = (f"certified in {cert.wall_s:.1f} s: {e.kind} at t = {format_interval(e.t, 20)}, multiplier in "
                f"[{mp.nstr(e.multiplier_range[0], 15)}, {mp.nstr(e.multiplier_range[1], 15)}] while it slides; "
                f"the closed form is {float(off):.1e} away")
    return text, ok, {"status": cert.status, "seconds": cert.wall_s, "closed_form_offset": float(off)}
