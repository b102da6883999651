"""The protocol's facts, declared once: encodings, profiles, sizes and the check of a job's
combination of encodings (docs/PROTOCOL.md, "Adding an encoding" in docs/ARCHITECTURE.md).

The ground floor: it imports nothing of the project's rooms, and every room (controller,
worker, harness, mininet/run.py, the dissector's test, the P4 generators' tests) reads it
instead of keeping its own list. The P4 sources keep their `#define`s and constants;
tests/test_protocol.py reads them and fails where they differ from what is declared here.
"""
