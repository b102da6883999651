"""The per-slot protocol of the allreduce client as a table: (state, event) -> (action, next).

A slot carries one use at a time; a use is a priming round (all-zero contributions whose
only purpose is to negotiate the first chunk's exponent) or one chunk. Each accepted
result completes the slot's current use; the slot's version alternates per use
(SwitchML's shadow copies), and the exponent a result carries scales the slot's next chunk.

The float32 encoding of the host-based baseline needs no exponent, so its slots skip
the priming round (START_UNPRIMED).
"""

from __future__ import annotations

from enum import IntEnum


class State(IntEnum):
    IDLE = 0        # not started in this call
    PRIMING = 1     # priming round in flight
    RUNNING = 2     # a chunk in flight
    DONE = 3        # every chunk of the slot has its result


class Event(IntEnum):
    START = 0           # the call begins and the slot has chunks (integer encodings)
    START_UNPRIMED = 1  # the same, float32 encoding
    RESULT_MORE = 2     # the awaited result; the slot has another chunk to send
    RESULT_LAST = 3     # the awaited result of the slot's last chunk
    STALE = 4           # a result for the slot that is not the awaited one (duplicate, old)
    TIMEOUT = 5         # the retransmission timer of the slot's current use expired


class Action(IntEnum):
    PRIME = 0           # send the priming contribution (zeros, first chunk's exponent)
    SEND_FIRST = 1      # send the slot's first chunk (no exponent to wait for)
    START_CHUNK = 2     # take the negotiated exponent, send the first chunk
    ACCEPT_NEXT = 3     # store the chunk's result, take the exponent, send the next chunk
    ACCEPT_LAST = 4     # store the chunk's result
    RETRANSMIT = 5      # resend the current use, back off the timer
    IGNORE = 6          # count it, change nothing


S, E, A = State, Event, Action
TABLE: dict[tuple[State, Event], tuple[Action, State]] = {
    (S.IDLE, E.START): (A.PRIME, S.PRIMING),
    (S.IDLE, E.START_UNPRIMED): (A.SEND_FIRST, S.RUNNING),
    (S.IDLE, E.STALE): (A.IGNORE, S.IDLE),
    (S.PRIMING, E.RESULT_MORE): (A.START_CHUNK, S.RUNNING),
    (S.PRIMING, E.STALE): (A.IGNORE, S.PRIMING),
    (S.PRIMING, E.TIMEOUT): (A.RETRANSMIT, S.PRIMING),
    (S.RUNNING, E.RESULT_MORE): (A.ACCEPT_NEXT, S.RUNNING),
    (S.RUNNING, E.RESULT_LAST): (A.ACCEPT_LAST, S.DONE),
    (S.RUNNING, E.STALE): (A.IGNORE, S.RUNNING),
    (S.RUNNING, E.TIMEOUT): (A.RETRANSMIT, S.RUNNING),
    (S.DONE, E.STALE): (A.IGNORE, S.DONE),
}

# Slots with a use in flight: they have a timer and await a result.
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
