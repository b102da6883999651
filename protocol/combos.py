"""Which combinations of encodings a job may have: what workers contribute, what the root
switch returns (results) and what switches below it send up (partial sums), on which
profile and for how many workers, and what a profile's packet growth and MTU allow. The
worker (worker/allreduce/job.py), the command lines and controller/profiles.py ask here.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.encodings import ALL, BY_CODE, BY_NAME, Encoding, max_workers, summed_into
from protocol.profiles import ProfileFacts
from protocol.sizes import MAX_GROWTH, MTU


def _label(code: int) -> str:
    enc = BY_CODE.get(code)
    return enc.label if enc else str(code)


def sums_problem(job_id: int, contribution: int, results: str, partials: str,
                 tree_switches: int = 1) -> str | None:
    """Why workers contributing `contribution` (a wire number) cannot be summed into the
    job's `results` and, up a tree of several switches, its `partials`; or None."""
    enc = BY_CODE.get(contribution)
    name = _label(contribution)
    ok = enc.sums if enc and enc.sums else None
    if ok is not None and results not in ok:
        return (f"job {job_id} returns {results} results; {name} contributions need "
                f"{' or '.join(ok)} results")
    if ok is not None and tree_switches > 1 and partials not in ok:
        return (f"job {job_id} sends {partials} partial sums up its tree; {name} "
                f"contributions need {' or '.join(ok)} partial sums")
    whose = summed_into(results)
    if results in _ONLY_SUMS and enc not in whose:
        return (f"job {job_id} returns {results} results, the sums of "
                f"{'/'.join(e.label for e in whose)} contributions, not of {name}")
    return None


# Results that are only ever sums of some contribution encodings (not an encoding a
# contribution may itself have): a job returning them needs those contributions.
_ONLY_SUMS = tuple(e.name for e in ALL if e.result and not e.worker)


def workers_problem(enc: Encoding, workers: int) -> int | None:
    """The most workers `enc`'s sums can carry, where `workers` exceeds it; else None."""
    most = max_workers(enc)
    return most if most is not None and workers > most else None


def profile_problem(prof: ProfileFacts, enc: Encoding) -> str | None:
    """Why the profile's program does not sum `enc` contributions, or None."""
    if prof.carries(enc):
        return None
    if prof.twin:
        lanes = [e.label for e in ALL if e.four_bit and e.tofino]
        other = [e.label for e in ALL if e.four_bit and not e.tofino]
        return (f"the Tofino profile sums {'/'.join(lanes)} in lanes and has no "
                f"{'/'.join(other)} decode")
    return f"a 4-bit packet of {prof.elems} elements cannot grow into a byte per element"


def sparse_problem(enc: Encoding) -> str | None:
    """Sparse jobs (one switch, block headers) take contributions FIXED32 or CNAT8 can sum
    into results whose padding the switch allows."""
    if enc.four_bit:
        takes = " or ".join(sorted(e.name for e in ALL if e.worker and not e.four_bit))
        return f"sparse jobs take {takes}"
    return None


def problem(contribution: str, results: str, partials: str, *, job_id: int = 0,
            prof: ProfileFacts | None = None, tree_switches: int = 1,
            workers: int | None = None, sparse: bool = False) -> str | None:
    """The one check of a job's combination: why `contribution` with `results` and
    `partials` cannot run (on `prof`, up a tree of `tree_switches`, for `workers`, as a
    sparse job), or None."""
    enc = BY_NAME[contribution]
    if sparse and (why := sparse_problem(enc)):
        return why
    if prof is not None and (why := profile_problem(prof, enc)):
        return (f"profile {prof.name} has no {enc.name} ({why}); use the default or wide4 "
                f"profile")
    if why := sums_problem(job_id, enc.code, results, partials, tree_switches):
        return why
    if workers is not None and (most := workers_problem(enc, workers)):
        into = BY_NAME[enc.sums[0]]
        return (f"job {job_id} has {workers} workers; a {into.label} sum of {enc.label}'s "
                f"0..{enc.top} carries at most {most}")
    return None


# What the Tofino profile sums in lanes (unsigned integers), and apart from them.
LANES = "/".join(e.label for e in ALL if e.tofino and e.top is not None)
NOT_LANES = " and ".join(e.label for e in ALL if e.tofino and e.top is None)


def job_problem(prof: ProfileFacts, job_id: int, results: str, partials: str, mode: str,
                multi: Callable[[], bool]) -> str | None:
    """Why the profile's program cannot aggregate a job returning `results` and sending
    `partials` up its tree (`multi()`: the tree has several switches, asked only where it
    matters), in `mode` (dense, sparse), or None."""
    if prof.twin:
        if mode == "sparse":
            return (f"job {job_id}: profile {prof.name} (the Tofino profile) has no sparse "
                    f"jobs; use mode dense or the default profile")
        several = multi()
        if prof.passes > 1 and (results != "cnat8" or several and partials != "cnat8"):
            sent = results if results != "cnat8" else partials
            return (f"job {job_id}: profile {prof.name} walks packets of {prof.passes} "
                    f"segments and re-compresses every result and partial sum to CNAT8: "
                    f"{sent} is not sent; use results cnat8 (and partials cnat8 on a tree) "
                    f"or the tofino profile")
        if (results == "sum8") != (partials == "sum8") and several:
            return (f"job {job_id}: profile {prof.name} (the Tofino profile) sums {LANES} "
                    f"lanes apart from {NOT_LANES}: results {results} and partials "
                    f"{partials} mix them; use sum8 for both or for neither")
        return None
    if mode == "sparse" and "sum8" in (results, partials):
        return (f"job {job_id}: sparse jobs take FIXED32 or CNAT8 contributions, so their "
                f"results are fixed32 or cnat8, not sum8")
    if not prof.cnat8_only:
        return None

    grow = 3 * prof.elems
    # 4-bit contributions grow into one-byte sums (sum8 or cnat8) by ELEMS/2 bytes
    four_bit = any(e.four_bit and prof.carries(e) for e in ALL)
    small = ("cnat8", "sum8") if four_bit else ("cnat8",)
    if results != "cnat8" and mode == "sparse":
        return (f"job {job_id}: profile {prof.name} ({prof.elems} elements per packet) "
                f"aggregates CNAT8 both ways only: a sparse job's {results} results would "
                f"grow a CNAT8 packet, or an EMPTY one over its {prof.elems} bytes of padding, "
                f"by {grow} bytes (BMv2 allows {MAX_GROWTH}); use results cnat8 or the "
                f"default profile")
    if results not in small:
        takes = ("aggregates CNAT8 both ways only" if small == ("cnat8",) else
                 f"takes {' or '.join(small)} results only")
        return (f"job {job_id}: profile {prof.name} ({prof.elems} elements per packet) "
                f"{takes}: {results} results would grow a CNAT8 packet by {grow} bytes "
                f"(BMv2 allows {MAX_GROWTH}) and a FIXED32 packet does not fit a {MTU}-byte "
                f"MTU; use results {' or '.join(small)} or the default profile")
    if partials not in small and multi():
        return (f"job {job_id}: profile {prof.name} ({prof.elems} elements per packet) "
                f"cannot send {partials} partial sums up a tree of several switches "
                f"(a packet would grow by {grow} bytes, BMv2 allows {MAX_GROWTH}); use "
                f"partials {' or '.join(small)} or the default profile")
    return None
