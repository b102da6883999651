"""The per-slot protocol of the allreduce client as a table: (state, event) -> (action, next).

A slot carries one use at a time; a use is the call's priming round (slot 0 only: all-zero
contributions whose only purpose is to negotiate the exponent of every slot's first
chunk) or one chunk. Each accepted result completes the slot's current use; the slot's
version alternates per use (SwitchML's shadow copies), and the exponent a result carries
scales the slot's next chunk. The other slots of the call wait (AWAIT_PRIME) until the
priming result releases them all at once.

A slot whose next chunk is known and scaled is READY; the client sends it (SEND) when
the chunk fits in its congestion window, lowest chunk first.

The float32 encoding of the host-based baseline needs no exponent, so its slots skip
the priming round (START_UNPRIMED).
"""

from __future__ import annotations

from enum import IntEnum


class State(IntEnum):
    IDLE = 0            # not started in this call
    PRIMING = 1         # the call's priming round in flight (slot 0)
    AWAIT_PRIME = 2     # has chunks; waits for the priming result's exponent
    READY = 3           # the next chunk is scaled; waits for room in the window
    RUNNING = 4         # a chunk in flight
    DONE = 5            # every chunk of the slot has its result


class Event(IntEnum):
    START_PRIMER = 0    # the call begins; this slot primes it (integer encodings, slot 0)
    START = 1           # the call begins; the slot has chunks (integer encodings, slots > 0)
    START_UNPRIMED = 2  # the call begins, float32 encoding (any slot)
    PRIMED = 3          # the priming result arrived (dispatched to the waiting slots)
    SEND = 4            # the slot's next chunk fits in the window
    RESULT_MORE = 5     # the awaited result; the slot has another chunk to send
    RESULT_LAST = 6     # the awaited result of the slot's last chunk
    STALE = 7           # a result for the slot that is not the awaited one (duplicate, old)
    TIMEOUT = 8         # the retransmission timer of the slot's current use expired


class Action(IntEnum):
    PRIME = 0           # send the priming contribution (zeros, the first chunks' max exponent)
    WAIT = 1            # nothing to send yet
    RELEASE = 2         # take the priming exponent for every slot of the call; wake the others
    TAKE_PRIME = 3      # take the priming exponent for the slot's first chunk
    SEND_CHUNK = 4      # encode and send the slot's next chunk
    ACCEPT_NEXT = 5     # store the chunk's result, take the exponent of the slot's next chunk
    ACCEPT_LAST = 6     # store the chunk's result
    RETRANSMIT = 7      # resend the current use, back off the timer
    IGNORE = 8          # count it, change nothing


S, E, A = State, Event, Action
TABLE: dict[tuple[State, Event], tuple[Action, State]] = {
    (S.IDLE, E.START_PRIMER): (A.PRIME, S.PRIMING),
    (S.IDLE, E.START): (A.WAIT, S.AWAIT_PRIME),
    (S.IDLE, E.START_UNPRIMED): (A.WAIT, S.READY),
    (S.IDLE, E.STALE): (A.IGNORE, S.IDLE),
    (S.PRIMING, E.RESULT_MORE): (A.RELEASE, S.READY),
    (S.PRIMING, E.STALE): (A.IGNORE, S.PRIMING),
    (S.PRIMING, E.TIMEOUT): (A.RETRANSMIT, S.PRIMING),
    (S.AWAIT_PRIME, E.PRIMED): (A.TAKE_PRIME, S.READY),
    (S.AWAIT_PRIME, E.STALE): (A.IGNORE, S.AWAIT_PRIME),
    (S.READY, E.SEND): (A.SEND_CHUNK, S.RUNNING),
    (S.READY, E.STALE): (A.IGNORE, S.READY),
    (S.RUNNING, E.RESULT_MORE): (A.ACCEPT_NEXT, S.READY),
    (S.RUNNING, E.RESULT_LAST): (A.ACCEPT_LAST, S.DONE),
    (S.RUNNING, E.STALE): (A.IGNORE, S.RUNNING),
    (S.RUNNING, E.TIMEOUT): (A.RETRANSMIT, S.RUNNING),
    (S.DONE, E.STALE): (A.IGNORE, S.DONE),
}

# Slots with a use in flight: they have a timer, await a result and count in the window.
IN_FLIGHT = (State.PRIMING, State.RUNNING)


class ProtocolError(RuntimeError):
    """An event the table has no row for: a bug in the client, never a network condition."""


def transition(state: int, event: int) -> tuple[Action, State]:
    """The row for (state, event); plain ints work too (IntEnum keys hash as ints)."""
    try:
        return TABLE[state, event]
    except KeyError:
        raise ProtocolError(f"no transition for event {Event(event).name} in state "
                            f"{State(state).name}") from None
